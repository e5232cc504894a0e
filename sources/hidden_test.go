package sources

import "testing"

func TestHidden(t *testing.T) {
	users, _ := ResourceByName("users")
	items, _ := ResourceByName("items")
	history, _ := ResourceByName("events_history")
	for _, tc := range []struct {
		r      *Resource
		path   string
		hidden bool
	}{
		{users, "password", true},
		{users, "password.keyword", true},
		{users, "session_preferences.5f0c6c5c9d0e7a3f1b2c4d5e", true},
		{users, "user_preferences.email:notification.enabled", true},
		{users, "user_preferences.0.email", true},
		{users, "PASSWORD", true},
		{users, "Password.x", true},
		{users, "pa\u017Fsword", true}, // long s folds to s
		{users, "0.password", true},    // an index before the field
		{users, "username", false},
		{users, "passwords", false},
		{users, "password_hint", false},
		{users, "_updated", false}, // queryable
		{users, "_updated.x", false},
		{users, "_etag", true},
		{history, "update", true}, // holds update._etag
		{history, "update._etag", true},
		{history, "update.0._etag", true},
		{history, "update.0.1._etag.x", true},
		{history, "UPDATE._ETAG", true},
		{history, "update.name", false},
		{history, "update.0.name", false},
		{history, "_updated", false},
		{items, "associations", false},
		{items, "associations.pic", false},
		{items, "associations.pic.lock_user", true},
		{items, "associations.0.lock_user", true},
		{items, "associations.pic.0.lock_user", true},
		{items, "associations.0.0.lock_user", true},
		{items, "associations.pic.LOCK_USER.x", true},
		{items, "associations.pic.headline", false},
		{items, "associations.pic._updated", false},
		{items, "lock_user", true},
		{items, "lock_user.keyword", true},
		{items, "headline", false},
		{items, "headline.0", false},
	} {
		if got := tc.r.Hidden(tc.path); got != tc.hidden {
			t.Errorf("%s.Hidden(%q) = %v, want %v", tc.r.Name, tc.path, got, tc.hidden)
		}
	}
}

func TestFoldName(t *testing.T) {
	for in, want := range map[string]string{"abc": "abc", "ABC": "abc", "\u212Aey": "key", "\u017F": "s", "Ünïcode": "ünïcode", "": ""} {
		if got := FoldName(in); got != want {
			t.Errorf("FoldName(%q) = %q, want %q", in, got, want)
		}
	}
}

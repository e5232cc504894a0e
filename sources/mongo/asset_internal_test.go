package mongo

import "testing"

func TestStripExt(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"5d553c333031e2855a2e5662.jpg", "5d553c333031e2855a2e5662"},
		{"5d553c333031e2855a2e5662", "5d553c333031e2855a2e5662"},
		{"a.b.c", "a.b"},
		{"a.", "a"},
		{".jpg", ".jpg"},
		{"..a", "..a"},
		{"...a.b", "...a"},
		{"dir.x/file", "dir.x/file"},
		{"20240115120112/photo.jpg", "20240115120112/photo"},
		{"x/.hidden", "x/.hidden"},
		{"", ""},
	} {
		if got := stripExt(tc.in); got != tc.want {
			t.Errorf("stripExt(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

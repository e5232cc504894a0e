package objstore

import (
	"strings"
	"testing"
)

func TestObjectKey(t *testing.T) {
	const hex = "5d553c333031e2855a2e5662"
	for _, tc := range []struct {
		name, prefix, id string
		wantKey          string // "" when no object can have the id
		wantName         string // defaults to wantKey without the prefix
	}{
		// get_by_filename: ^([a-f0-9]{24})\.[a-z]{3,4} names the 24-hex key.
		{name: "hex with extension", id: hex + ".jpg", wantKey: hex},
		{name: "hex with 4-letter extension", id: hex + ".jpeg", wantKey: hex},
		{name: "match anchored at the start only", id: hex + ".jpegx", wantKey: hex},
		{name: "anything after the match", id: hex + ".png/more", wantKey: hex},
		{name: "anything after the match, unsafe or not ASCII", id: hex + ".jpg{é}", wantKey: hex},
		{name: "hex with extension under a prefix", prefix: "media/sub", id: hex + ".png", wantKey: "media/sub/" + hex, wantName: hex},
		{name: "bare hex is the whole id", id: hex, wantKey: hex},
		{name: "upper-case hex is the whole id", id: strings.ToUpper(hex) + ".jpg", wantKey: strings.ToUpper(hex) + ".jpg"},
		{name: "upper-case extension is the whole id", id: hex + ".JPG", wantKey: hex + ".JPG"},
		{name: "2-letter extension is the whole id", id: hex + ".ai", wantKey: hex + ".ai"},
		{name: "digit in extension is the whole id", id: hex + ".mp4", wantKey: hex + ".mp4"},
		{name: "23 hex digits is the whole id", id: hex[1:] + ".jpg", wantKey: hex[1:] + ".jpg"},
		{name: "25 hex digits is the whole id", id: hex + "1.jpg", wantKey: hex + "1.jpg"},
		{name: "hex not at the start is the whole id", id: "x" + hex + ".jpg", wantKey: "x" + hex + ".jpg"},
		{name: "non-hex letter is the whole id", id: "5d553c333031e2855a2e566g.jpg", wantKey: "5d553c333031e2855a2e566g.jpg"},
		// S3-style ids: "<time version>/<S3-safe filename>".
		{name: "S3 id", id: "20240115120112/photo.jpg", wantKey: "20240115120112/photo.jpg"},
		{name: "S3 id under a prefix", prefix: "sd", id: "20240115120112/photo.jpg", wantKey: "sd/20240115120112/photo.jpg", wantName: "20240115120112/photo.jpg"},
		{name: "S3 id with a space and a plus", id: "2024011512/my photo+1.jpg", wantKey: "2024011512/my photo+1.jpg"},
		// _make_s3_safe removes 15 characters, from the whole id.
		{name: "every unsafe character removed", id: "20240115120112/p\\h{o^t}o%`]>[~<#|'\".jpg", wantKey: "20240115120112/photo.jpg"},
		{name: "unsafe characters in a would-be hex name", id: hex + ".j{p}g", wantKey: hex + ".jpg"},
		{name: "unsafe characters under a prefix", prefix: "sd", id: "a#b", wantKey: "sd/ab", wantName: "ab"},
		{name: "safe punctuation kept", id: "2024/a-b_c.d(e)!*&$@=;:,?.txt", wantKey: "2024/a-b_c.d(e)!*&$@=;:,?.txt"},
		// Ids no object can have (the original found nothing or crashed).
		{name: "empty", id: ""},
		{name: "only unsafe characters", id: "{}#"},
		{name: "only unsafe characters under a prefix", prefix: "sd", id: "<>"},
		{name: "not ASCII", id: "20240115120112/façade.jpg"},
		{name: "control character", id: "photo\x00.jpg"},
		{name: "DEL", id: "photo\x7f.jpg"},
		{name: "dot-dot segment", id: "20240115120112/../secret"},
		{name: "dot segment", id: "./photo.jpg"},
		{name: "too long for S3", id: strings.Repeat("a", maxKeyLen+1)},
		{name: "too long with the prefix", prefix: "sd", id: strings.Repeat("a", maxKeyLen-2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotKey, gotName, ok := ObjectKey(tc.prefix, tc.id)
			if tc.wantKey == "" {
				if ok {
					t.Errorf("ObjectKey(%q, %q) = %q, %q, true; want no key", tc.prefix, tc.id, gotKey, gotName)
				}
				return
			}
			wantName := tc.wantName
			if wantName == "" {
				wantName = tc.wantKey
			}
			if !ok || gotKey != tc.wantKey || gotName != wantName {
				t.Errorf("ObjectKey(%q, %q) = %q, %q, %v; want %q, %q, true", tc.prefix, tc.id, gotKey, gotName, ok, tc.wantKey, wantName)
			}
		})
	}
}

func FuzzObjectKey(f *testing.F) {
	// Seeds: testdata/fuzz/FuzzObjectKey.
	f.Fuzz(func(t *testing.T, prefix, id string) {
		prefix = strings.Trim(prefix, "/")
		key, name, ok := ObjectKey(prefix, id)
		if !ok {
			return
		}
		if name == "" || len(key) > maxKeyLen || strings.ContainsAny(name, "\\{^}%`]>[~<#|'\"") && !mongoIDName.MatchString(id) {
			t.Fatalf("ObjectKey(%q, %q) = %q, %q", prefix, id, key, name)
		}
		if prefix != "" && key != prefix+"/"+name || prefix == "" && key != name {
			t.Fatalf("ObjectKey(%q, %q) = %q, %q: key is not prefix/name", prefix, id, key, name)
		}
		for seg := range strings.SplitSeq(name, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("ObjectKey(%q, %q) = %q: traversal segment", prefix, id, key)
			}
		}
	})
}

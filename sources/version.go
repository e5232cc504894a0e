package sources

import (
	"strconv"
	"strings"
)

// MajorMinor reads the major and minor numbers of a server's version
// ("7.10.2", "7.10.2-SNAPSHOT", "4.4"), for the adapters' version rules.
func MajorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

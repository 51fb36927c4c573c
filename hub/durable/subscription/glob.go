package subscription

import "strings"

// Match reports whether path matches the glob pattern: "*" matches one
// path segment, "**" zero or more, any other segment itself ("%2A" is a
// literal "*").
func Match(pattern, path string) bool {
	return matchParts(segments(pattern), segments(path))
}

func segments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func matchParts(pat, path []string) bool {
	for len(pat) > 0 && len(path) > 0 {
		switch seg := pat[0]; seg {
		case "**":
			for i := 0; i <= len(path); i++ {
				if matchParts(pat[1:], path[i:]) {
					return true
				}
			}
			return false
		case "*":
		default:
			if strings.ReplaceAll(strings.ReplaceAll(seg, "%2A", "*"), "%2a", "*") != path[0] {
				return false
			}
		}
		pat, path = pat[1:], path[1:]
	}
	for len(pat) > 0 && pat[0] == "**" {
		pat = pat[1:]
	}
	return len(pat) == 0 && len(path) == 0
}

// normalize is a stream-root-relative path without leading or trailing
// slashes.
func normalize(p string) string { return strings.Trim(p, "/") }

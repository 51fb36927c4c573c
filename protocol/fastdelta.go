package protocol

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// validDelta reports whether raw is exactly {"<id>":"…","text":"…"} (the
// two members in either order, once each, no white space, both values
// strings) — the shape every token and reasoning delta takes when a
// driver emits it. Such a payload passes every check of ValidateEvent's
// full path (a JSON object holding the type's required fields with the
// types its payload struct wants), which decodes it twice; deltas are
// most of what a journal takes, so they skip that. Anything else, valid
// or not, reports false and goes the full path, which says what is wrong.
func validDelta(raw []byte, idKey string) bool {
	_, _, ok := deltaStrings(raw, idKey)
	return ok
}

// deltaStrings is validDelta returning the two values as they are in raw
// (JSON strings, quotes included).
func deltaStrings(raw []byte, idKey string) (id, text []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return nil, nil, false
	}
	i := 1
	for n := range 2 {
		if n == 1 {
			if i >= len(raw) || raw[i] != ',' {
				return nil, nil, false
			}
			i++
		}
		end := stringEnd(raw, i)
		if end < 0 || end >= len(raw) || raw[end] != ':' {
			return nil, nil, false
		}
		key := raw[i+1 : end-1]
		if i = stringEnd(raw, end+1); i < 0 {
			return nil, nil, false
		}
		switch value := raw[end+1 : i]; {
		case id == nil && string(key) == idKey:
			id = value
		case text == nil && string(key) == "text":
			text = value
		default:
			return nil, nil, false // another member, a repeated one, or an escaped key
		}
	}
	return id, text, i == len(raw)-1
}

// unquote decodes a JSON string validated by stringEnd as encoding/json
// would: as it is when it holds no escape and is valid UTF-8 (the common
// case, no decoding), else by encoding/json.
func unquote(q []byte) (string, bool) {
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	var s string
	if json.Unmarshal(q, &s) != nil {
		return "", false
	}
	return s, true
}

// stringEnd returns the index just past the JSON string that starts at
// raw[i], or -1 if there is none. It accepts what encoding/json accepts in
// a string: no control characters, the escapes \" \\ \/ \b \f \n \r \t
// and \uXXXX; bytes from 0x80 on pass (encoding/json replaces invalid
// UTF-8, it does not refuse it).
func stringEnd(raw []byte, i int) int {
	if i >= len(raw) || raw[i] != '"' {
		return -1
	}
	for i++; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(raw) {
				return -1
			}
			switch raw[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(raw) {
					return -1
				}
				for _, h := range raw[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

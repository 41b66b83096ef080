package httpbind

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/jetgate/jetgate/admission/ojs"
)

// maxCursorLen bounds the opaque cursor a client sends back.
const maxCursorLen = 1024

// parsePage reads limit, offset and cursor (ojs-http-binding.md 17.1).
// limit defaults to def; a limit above hi is lowered to hi rather than
// refused (the response's pagination.limit shows the page size used), a
// limit below 1 or a negative offset answers 400.
func parsePage(q url.Values, def, hi int) (ojs.PageRequest, error) {
	p := ojs.PageRequest{Limit: def, Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, invalid("limit", fmt.Sprintf("an integer between 1 and %d", hi), strconv.Quote(short(v)))
		}
		p.Limit = min(n, hi)
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1<<31-1 {
			return p, invalid("offset", "an integer >= 0", strconv.Quote(short(v)))
		}
		p.Offset = n
	}
	if len(p.Cursor) > maxCursorLen {
		return p, invalid("cursor", "a cursor returned as pagination.next_cursor", short(p.Cursor))
	}
	return p, nil
}

// pageCursor is the content of the cursors httpbind itself hands out, for
// lists it pages in memory. Clients must treat them as opaque (17.1).
type pageCursor struct {
	Off int `json:"off"`
}

func encodeCursor(offset int) string {
	b, _ := json.Marshal(pageCursor{Off: offset})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string) (int, error) {
	var pc pageCursor
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(b, &pc)
	}
	if err != nil || pc.Off < 0 {
		return 0, invalid("cursor", "a cursor returned as pagination.next_cursor", strconv.Quote(short(c)))
	}
	return pc.Off, nil
}

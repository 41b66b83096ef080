package httpbind

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
	"github.com/jetgate/jetgate/admission/ojs/wire"
)

// readBody reads the whole (size-limited) request body and refuses one
// whose JSON would not be read as sent (wire.CheckBody: text that is not
// UTF-8, a key given twice). Every handler reads its body here; the body
// of a POST, PUT, PATCH or DELETE was read and checked before the handler
// ran (limitBody), whether the handler reads it or not.
func readBody(r *http.Request) ([]byte, error) {
	if cb, ok := r.Body.(*checkedBody); ok {
		return cb.b, nil
	}
	b, err := io.ReadAll(r.Body)
	if err == nil {
		if err := wire.CheckBody(b); err != nil {
			return nil, err
		}
		return b, nil
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		// A body without Content-Length, cut off at the limit: its size
		// is unknown, only that it is larger.
		return nil, errTooLarge(mbe.Limit, 0)
	}
	return nil, &ojs.ValidationError{Field: "body", Rule: "a complete request body",
		Message: "could not read the request body: " + err.Error()}
}

// readObject reads the request body as a JSON object. An empty body reads
// as {} so that required fields, not the body, are reported missing.
func readObject(r *http.Request) (object, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return parseObject(b)
}

// checkedBody is a request body read and checked by readBody, handed to
// the handler as its r.Body.
type checkedBody struct {
	bytes.Reader
	b []byte
}

func newCheckedBody(b []byte) *checkedBody {
	cb := &checkedBody{b: b}
	cb.Reset(b)
	return cb
}

func (*checkedBody) Close() error { return nil }

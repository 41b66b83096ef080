package httpbind

import (
	"errors"
	"io"
	"net/http"

	"github.com/jetgate/jetgate/admission/ojs"
)

// readBody reads the whole (size-limited) request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err == nil {
		return b, nil
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, errTooLarge(mbe.Limit)
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

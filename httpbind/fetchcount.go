package httpbind

import (
	"errors"
	"fmt"
	"strconv"
)

// fetchCount reads a fetch's "count" (default 1). Any integer of at least 1
// is accepted and served up to limit, the server's cap (Config.MaxFetchCount):
// an SDK asks for as many jobs as it has free handler slots, which may be
// far more than one fetch returns (spec/README.md, what clients send), so a
// large count is lowered like a list limit rather than refused. Only a
// count below 1 or a value that is not an integer answers 400.
func (o object) fetchCount(limit int) (int64, error) {
	raw, ok := o.get("count")
	if !ok {
		return 1, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if errors.Is(err, strconv.ErrRange) && raw[0] != '-' {
		n, err = int64(limit), nil
	}
	if err != nil || n < 1 {
		return 0, invalid("count", fmt.Sprintf("an integer of at least 1 (more than %d is served as %d)", limit, limit),
			describe(raw))
	}
	return min(n, int64(limit)), nil
}

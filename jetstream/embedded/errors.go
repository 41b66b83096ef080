package embedded

import "errors"

// ErrDataDirLocked is returned by Start when another process, or another
// Server in this process, uses the same data dir.
var ErrDataDirLocked = errors.New("data dir is in use by another jetgate or nats-server")

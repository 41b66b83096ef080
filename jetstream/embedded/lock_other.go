//go:build !unix

package embedded

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK on platforms without flock: the data dir is
// not protected against a second process there.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return f, nil
}

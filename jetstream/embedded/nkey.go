package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nats-io/nkeys"
)

// userKey returns the public key of the nkey user seed in the file at
// path. With create, a missing file is first written with a new user seed:
// to a temp file of mode 0600 in the same directory, synced, then renamed
// into place, so that a crash leaves either no file or a whole one. The
// caller holds the data dir's lock, so two servers never race to create
// it. A seed file readable by group or others is refused (as ssh refuses
// such a private key): whoever reads it is every NATS client's equal.
func userKey(path string, create bool) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := writeSeed(path); err != nil {
			return "", err
		}
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("embedded: read nkey seed file: %w", err)
	}
	if err := privateFile(path); err != nil {
		return "", err
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return "", fmt.Errorf("embedded: nkey seed file %s: %w", path, err)
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("embedded: nkey seed file %s: %w", path, err)
	}
	if !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("embedded: nkey seed file %s holds no user seed (one starting with SU; nsc or `nk -gen user` make one)", path)
	}
	return pub, nil
}

// writeSeed creates the seed file at path with a new user seed.
func writeSeed(path string) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("embedded: create nkey seed: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return fmt.Errorf("embedded: create nkey seed: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".nkey-*")
	if err != nil {
		return fmt.Errorf("embedded: write nkey seed file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename: nothing to remove
	// CreateTemp makes the file 0600 already; be explicit about it.
	err = errors.Join(f.Chmod(0o600), writeAll(f, append(seed, '\n')), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("embedded: write nkey seed file %s: %w", path, err)
	}
	return nil
}

func writeAll(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// privateFile refuses a file that group or others may read or write.
// Windows has no such mode bits to check.
func privateFile(path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("embedded: nkey seed file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("embedded: nkey seed file %s has mode %04o: others may read it (chmod 600 %s)", path, perm, path)
	}
	return nil
}

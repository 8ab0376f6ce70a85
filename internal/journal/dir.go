package journal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	instanceIDName = "instance-id"
	bindingName    = "database"
	instanceIDLen  = 32
)

// lockDir takes an exclusive flock on the directory itself, held until
// the returned file is closed. A lock file inside it could be deleted (a
// tmp cleaner, an operator tidying up) and let a second daemon in; the
// directory cannot be replaced without every segment in it. flock belongs
// to the open file description, so a second Journal in the same process
// is refused too.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open directory to lock it: %w", err)
	}
	conn, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	var lockErr error
	if err := conn.Control(func(fd uintptr) {
		lockErr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
	}); err != nil {
		lockErr = err
	}
	if lockErr != nil {
		f.Close()
		if errors.Is(lockErr, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, lockErr)
	}
	return f, nil
}

// dirID names the locked directory itself, device and inode: a copy of
// it, or a directory made again at the same path, has another.
func dirID(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino)) //nolint:unconvert // Dev is int32 on darwin
}

// readInstanceID reads dir/instance-id; ok is false if there is none.
func readInstanceID(dir string) (id string, ok bool, err error) {
	path := filepath.Join(dir, instanceIDName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read instance id: %w", err)
	}
	id = string(b)
	if !validInstanceID(id) {
		return "", false, fmt.Errorf("%s holds %q, not %d lowercase hex characters", path, b, instanceIDLen)
	}
	return id, true, nil
}

// newInstanceID returns a fresh random instance id.
func newInstanceID() string {
	var raw [instanceIDLen / 2]byte
	rand.Read(raw[:]) // never fails: see crypto/rand.Read
	return hex.EncodeToString(raw[:])
}

// saveInstanceID writes id to dir/instance-id durably.
func saveInstanceID(dir, id string) error {
	if err := saveFile(dir, instanceIDName, []byte(id)); err != nil {
		return fmt.Errorf("save instance id: %w", err)
	}
	return nil
}

// saveFile writes dir/name durably. The file is written to a temporary
// name and renamed so that a crash can never leave it half written.
func saveFile(dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := writeFileSync(tmp, b); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func validInstanceID(id string) bool {
	if len(id) != instanceIDLen {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory so that created, renamed or truncated-to-new
// entries in it survive power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for fsync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

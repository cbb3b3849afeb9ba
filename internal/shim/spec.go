package shim

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ControlFD is the descriptor on which a shim receives its command:
// one end of a unix stream socket pair whose other end the agent keeps.
const ControlFD = 4

// StartTimeout bounds how long the agent waits for a shim to take its
// spec and report the command's pid.
const StartTimeout = 10 * time.Second

// MaxSpecBytes bounds the spec a shim accepts. A spec holds the argv,
// environment and cwd of one validated request (each bounded by the
// request's own limits), far below this.
const MaxSpecBytes = 16 << 20

// Spec is what the agent sends a shim on its control socket, together
// with the command's stdin, stdout and stderr as SCM_RIGHTS descriptors.
type Spec struct {
	Path  string   `json:"path"`
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	NProc int      `json:"nproc,omitempty"`
	TTY   bool     `json:"tty,omitempty"`
}

// SendSpec writes spec to the shim's control socket ctl: a 4-byte
// length carrying stdio as SCM_RIGHTS, then the JSON spec. The
// descriptors are duplicated into the shim; the caller still owns stdio.
func SendSpec(ctl *os.File, spec Spec, stdio [3]*os.File) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("shim spec: %w", err)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	fds := []int{int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd())}
	rc, err := ctl.SyscallConn()
	if err != nil {
		return fmt.Errorf("shim control: %w", err)
	}
	// A stopped shim must not hold the request forever.
	_ = ctl.SetWriteDeadline(time.Now().Add(StartTimeout))
	var serr error
	werr := rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), hdr[:], unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN
	})
	if err := errors.Join(werr, serr); err != nil {
		return fmt.Errorf("send shim spec: %w", err)
	}
	if _, err := ctl.Write(body); err != nil {
		return fmt.Errorf("send shim spec: %w", err)
	}
	return nil
}

// recvSpec reads one spec and its three stdio descriptors from the
// control socket fd, blocking until the agent sends it. io.EOF means the
// agent closed the socket without sending one.
func recvSpec(fd int) (Spec, [3]int, error) {
	var spec Spec
	stdio := [3]int{-1, -1, -1}
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(fd, hdr[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return spec, stdio, fmt.Errorf("read spec: %w", err)
	}
	if n == 0 && oobn == 0 {
		return spec, stdio, io.EOF
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return spec, stdio, fmt.Errorf("read spec: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if len(fds) != 3 {
		for _, f := range fds {
			unix.Close(f)
		}
		return spec, stdio, fmt.Errorf("read spec: got %d descriptors, want 3", len(fds))
	}
	copy(stdio[:], fds)
	fail := func(err error) (Spec, [3]int, error) {
		for _, f := range stdio {
			unix.Close(f)
		}
		return spec, [3]int{-1, -1, -1}, err
	}
	if n < len(hdr) { // a stream socket may split the header
		if _, err := io.ReadFull(fdReader(fd), hdr[n:]); err != nil {
			return fail(fmt.Errorf("read spec: %w", err))
		}
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > MaxSpecBytes {
		return fail(fmt.Errorf("spec of %d bytes, at most %d", size, MaxSpecBytes))
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(fdReader(fd), body); err != nil {
		return fail(fmt.Errorf("read spec: %w", err))
	}
	if err := json.Unmarshal(body, &spec); err != nil {
		return fail(fmt.Errorf("spec: %w", err))
	}
	if spec.Path == "" || len(spec.Argv) == 0 {
		return fail(errors.New("spec: path and argv are required"))
	}
	return spec, stdio, nil
}

// fdReader reads a blocking descriptor with read(2), retrying EINTR.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

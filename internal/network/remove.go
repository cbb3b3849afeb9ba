package network

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/google/nftables"
)

// RemoveTable deletes a daemon's whole nftables table. It is for tearing
// down a daemon for good (tests, uninstall) after its sandboxes are gone;
// a restarting daemon keeps and reuses its table.
func RemoveTable(name string) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return err
	}
	for _, t := range tables {
		if t.Name == name {
			c.DelTable(t)
			return c.Flush()
		}
	}
	return nil
}

// PinnedIDs returns the ids whose network namespace is pinned in the pin
// namespace of stateDir (see pins.go), nil if there is none. It works
// whether or not a daemon runs: it joins the namespace through its pin on
// the host, on a thread of its own that then ends.
func PinnedIDs(stateDir string) ([]string, error) {
	var ids []string
	err := inPinNS(stateDir, func() error {
		info, err := os.ReadFile("/proc/thread-self/mountinfo")
		if err != nil {
			return err
		}
		ents, err := os.ReadDir("/netns")
		if err != nil {
			return err
		}
		for _, e := range ents {
			if mountedAt(info, "/netns/"+e.Name()) {
				ids = append(ids, e.Name())
			}
		}
		return nil
	})
	if errors.Is(err, errNoPinNS) {
		return nil, nil
	}
	return ids, err
}

// RemovePins removes every pin of stateDir's pin namespace and the
// namespace's own pin on the host, so that it ends. It is for tearing down
// a daemon for good (tests, uninstall) after its sandboxes are gone.
func RemovePins(stateDir string) error {
	err := inPinNS(stateDir, func() error {
		ents, err := os.ReadDir("/netns")
		if err != nil {
			return err
		}
		var errs []error
		for _, e := range ents {
			errs = append(errs, removePin("/netns/"+e.Name()))
		}
		return errors.Join(errs...)
	})
	if err != nil && !errors.Is(err, errNoPinNS) {
		return err
	}
	return unpinHost(filepath.Join(stateDir, pinsFile))
}

// inPinNS runs fn on a thread of its own in stateDir's pin namespace;
// the thread ends with it.
func inPinNS(stateDir string, fn func() error) error {
	f, err := openPinNS(filepath.Join(stateDir, pinsFile))
	if err != nil {
		return err
	}
	defer f.Close()
	errc := make(chan error, 1)
	onOwnThread(func() {
		if err := joinPinNS(f); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	})
	return <-errc
}

package network

import (
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

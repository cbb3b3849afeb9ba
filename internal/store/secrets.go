package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/paddock-sandbox/paddock/internal/sandbox"
	bolt "go.etcd.io/bbolt"
)

// SecretRecord is a stored secret of one API key.
type SecretRecord struct {
	Owner     string    `json:"owner"`
	Name      string    `json:"name"`
	Value     string    `json:"value"`
	Hosts     []string  `json:"hosts"`
	CreatedAt time.Time `json:"created_at"`
}

func secretKey(owner, name string) []byte { return []byte(owner + "/" + name) }

// PutSecret creates or replaces a secret.
func (s *Store) PutSecret(r *SecretRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.write(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSecrets).Put(secretKey(r.Owner, r.Name), b)
	})
}

// Secret returns owner's secret name or sandbox.ErrNotFound.
func (s *Store) Secret(owner, name string) (*SecretRecord, error) {
	var r *SecretRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSecrets).Get(secretKey(owner, name))
		if v == nil {
			return fmt.Errorf("secret %q: %w", name, sandbox.ErrNotFound)
		}
		r = new(SecretRecord)
		return json.Unmarshal(v, r)
	})
	return r, err
}

// Secrets lists owner's secrets by name.
func (s *Store) Secrets(owner string) ([]*SecretRecord, error) {
	var out []*SecretRecord
	prefix := owner + "/"
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSecrets).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && strings.HasPrefix(string(k), prefix); k, v = c.Next() {
			r := new(SecretRecord)
			if err := json.Unmarshal(v, r); err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// DeleteSecret removes owner's secret name.
func (s *Store) DeleteSecret(owner, name string) error {
	return s.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSecrets)
		if b.Get(secretKey(owner, name)) == nil {
			return fmt.Errorf("secret %q: %w", name, sandbox.ErrNotFound)
		}
		return b.Delete(secretKey(owner, name))
	})
}

package kube

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad: a kubeconfig's server, CA and token reach the wire, and an API
// server's Status answer becomes a StatusError.
func TestLoad(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok123" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"kind":"Status","code":404,"reason":"NotFound","message":"leases \"x\" not found"}`))
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, ca string }{
		{"inline CA", "certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM)},
		{"CA file relative to the kubeconfig", "certificate-authority: ca.crt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n    server: " + srv.URL +
				"\n    " + tt.ca + "\nusers:\n- name: u\n  user:\n    token: tok123\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
			p := filepath.Join(dir, "kubeconfig")
			if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(p)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Get(context.Background(), "/apis/coordination.k8s.io/v1/namespaces/p/leases/x", nil)
			if !IsNotFound(err) || !strings.Contains(err.Error(), `leases "x" not found`) {
				t.Fatalf("Get: %v, want the server's 404", err)
			}
		})
	}
}

package cluster

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/paddock-sandbox/paddock/internal/cluster/kube"
)

// CRD is the Sandbox CustomResourceDefinition (YAML).
//
//go:embed crd.yaml
var CRD []byte

const crdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// Install creates the namespace ns and the Sandbox CRD if missing and waits
// until the CRD is served. It needs cluster-admin-like rights; the
// DaemonSet and gateway never call it (deploy/kubernetes applies the CRD).
func Install(ctx context.Context, kc *kube.Client, ns string) error {
	nsObj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}
	if err := kc.Create(ctx, "/api/v1/namespaces", nsObj, nil); err != nil && !kube.IsConflict(err) {
		return fmt.Errorf("namespace: %w", err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(CRD, &crd); err != nil {
		return fmt.Errorf("crd.yaml: %w", err)
	}
	if err := kc.Create(ctx, crdPath, crd, nil); err != nil && !kube.IsConflict(err) {
		return fmt.Errorf("crd: %w", err)
	}
	for {
		var got struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		if err := kc.Get(ctx, crdPath+"/sandboxes."+Group, &got); err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == "Established" && c.Status == "True" {
				// the resource path answers a moment after Established
				return waitServed(ctx, kc, ns)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("crd not established: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitServed(ctx context.Context, kc *kube.Client, ns string) error {
	for {
		var l json.RawMessage
		err := kc.Get(ctx, sandboxesPath(ns), &l)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandboxes resource not served: %w (%v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

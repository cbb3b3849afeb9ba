package server

// Conversions from wire types (package api) to domain types (package
// sandbox): the server alone converts; the manager speaks domain types.

import (
	"github.com/paddock-sandbox/paddock/api"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
	"github.com/paddock-sandbox/paddock/internal/template/catalog"
)

func createRequest(r api.CreateSandboxRequest) sandbox.CreateRequest {
	out := sandbox.CreateRequest{
		Template: r.Template, TimeoutSeconds: r.TimeoutSeconds, Env: r.Env, Metadata: r.Metadata,
		OnTimeout: r.OnTimeout, MaxCostMicros: r.MaxCostMicros, Secrets: r.Secrets,
		Idle: sandbox.IdlePolicy{TimeoutSeconds: r.IdleTimeoutSeconds, OnIdle: r.OnIdle,
			AutoResume: r.AutoResume, CountProcesses: r.IdleCountsProcesses},
	}
	if r.Resources != nil {
		out.Resources = sandbox.Resources{VCPUs: r.Resources.VCPUs, MemoryMiB: r.Resources.MemoryMiB,
			DiskMiB: r.Resources.DiskMiB, PIDs: r.Resources.PIDs}
	}
	if r.Network != nil {
		p := networkPolicy(*r.Network)
		out.Network = &p
	}
	return out
}

func networkPolicy(p api.NetworkPolicy) sandbox.NetworkPolicy {
	return sandbox.NetworkPolicy{Mode: p.Mode, Allow: p.Allow, Deny: p.Deny}
}

func secret(r api.CreateSecretRequest) sandbox.Secret {
	return sandbox.Secret{Name: r.Name, Value: r.Value, Hosts: r.Hosts}
}

func metrics(m *sandbox.Metrics) api.Metrics {
	return api.Metrics{
		SandboxID: m.SandboxID, State: string(m.State), SampledAt: m.SampledAt,
		CPUSeconds: m.CPUSeconds, RunningSeconds: m.RunningSeconds,
		MemoryBytes: m.MemoryBytes, MemoryPeakBytes: m.MemoryPeakBytes, MemoryGiBSeconds: m.MemoryGiBSeconds,
		DiskBytes: m.DiskBytes, NetworkRxBytes: m.NetRxBytes, NetworkTxBytes: m.NetTxBytes, PIDs: m.PIDs,
		CostMicros: m.CostMicros,
	}
}

func usage(u *sandbox.Usage) api.Usage {
	return api.Usage{KeyID: u.Owner, From: u.From, To: u.To, Sandboxes: u.Sandboxes, CPUSeconds: u.CPUSeconds,
		RunningSeconds: u.RunningSeconds, MemoryGiBSeconds: u.MemoryGiBSeconds, CostMicros: u.CostMicros}
}

func secretInfo(s sandbox.SecretInfo) api.Secret {
	return api.Secret{Name: s.Name, Hosts: s.Hosts, CreatedAt: s.CreatedAt}
}

func buildRequest(r api.CreateTemplateRequest) catalog.BuildRequest {
	out := catalog.BuildRequest{Name: r.Name, Recipe: r.Recipe, Dockerfile: r.Dockerfile, Context: r.Context,
		BuildArgs: r.BuildArgs, StepTimeoutSeconds: r.StepTimeoutSeconds, NoCache: r.NoCache}
	if r.From != nil {
		out.From = &catalog.Source{Image: r.From.Image, OCILayout: r.From.OCILayout, Tarball: r.From.Tarball,
			Tag: r.From.Tag, Template: r.From.Template}
	}
	if r.Resources != nil {
		out.Resources = sandbox.Resources{VCPUs: r.Resources.VCPUs, MemoryMiB: r.Resources.MemoryMiB,
			DiskMiB: r.Resources.DiskMiB, PIDs: r.Resources.PIDs}
	}
	if r.Network != nil {
		p := networkPolicy(*r.Network)
		out.Network = &p
	}
	return out
}

func templateAPI(t *catalog.Template) api.Template {
	return api.Template{Name: t.Name, Source: t.Source, Digest: t.Digest, Size: t.Size, Layers: t.Layers,
		CreatedAt: t.CreatedAt, Shared: t.Shared, Owner: t.Owner, Runtime: t.Runtime, OnBase: t.OnBase,
		Env: t.Env, Workdir: t.Workdir, User: t.User, Cmd: t.Cmd, Status: t.Status}
}

func buildEventAPI(ev catalog.BuildEvent) api.BuildEvent {
	out := api.BuildEvent{Type: ev.Type, Step: ev.Step, Steps: ev.Steps, Instruction: ev.Instruction,
		Stream: ev.Stream, Output: ev.Output, DurationMS: ev.DurationMS}
	if ev.Template != nil {
		t := templateAPI(ev.Template)
		out.Template = &t
	}
	return out
}

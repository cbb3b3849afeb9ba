package pod

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/paddock-sandbox/paddock/internal/agent"
	"github.com/paddock-sandbox/paddock/internal/sandbox"
)

// podFor is the Pod of a sandbox: the init container copies the agent into
// an emptyDir; the sandbox container runs the template image with the agent
// as its PID 1 on the pod network behind the token of its Secret (mounted
// read-only at tokenMount; the sandbox can read its own token, which
// reaches nothing but its own agent); Spec.Env reaches every
// command through the container's environment; the workspace is an
// emptyDir bounded by the disk size; no service account token, no service
// links. With Config.MaxLifetime the Pod has an activeDeadlineSeconds of
// it plus DeadlineGrace: a backstop for leases while paddockd is down
// (Kubernetes lets a Pod's deadline only be lowered, never raised, so it
// is the longest lease, not the sandbox's current one).
func (b *Backend) podFor(spec sandbox.Spec, tpl Template) pod {
	no := false
	grace := int64(1)
	var env []envVar
	for k, v := range spec.Env {
		env = append(env, envVar{Name: k, Value: v})
	}
	slices.SortFunc(env, func(a, b envVar) int { return cmp.Compare(a.Name, b.Name) })
	res := &resources{Limits: map[string]string{}, Requests: map[string]string{}}
	if r := spec.Resources; r.VCPUs > 0 {
		res.Limits["cpu"] = strconv.FormatFloat(r.VCPUs, 'f', -1, 64)
		res.Requests["cpu"] = "10m"
	}
	if r := spec.Resources; r.MemoryMiB > 0 {
		res.Limits["memory"] = fmt.Sprintf("%dMi", r.MemoryMiB)
		res.Requests["memory"] = fmt.Sprintf("%dMi", min(r.MemoryMiB, 32))
	}
	workspace := volume{Name: "workspace", EmptyDir: &emptyDir{}}
	if spec.Resources.DiskMiB > 0 {
		workspace.EmptyDir.SizeLimit = fmt.Sprintf("%dMi", spec.Resources.DiskMiB)
	}
	var deadline *int64
	if b.cfg.MaxLifetime > 0 {
		d := int64((b.cfg.MaxLifetime + DeadlineGrace + time.Second - 1) / time.Second)
		deadline = &d
	}
	return pod{
		APIVersion: "v1", Kind: "Pod",
		Metadata: objectMeta{Name: podName(spec.ID), Namespace: b.cfg.Namespace, Labels: b.labels(spec.ID)},
		Spec: podSpec{
			RestartPolicy:                 "Never",
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			Hostname:                      "sandbox",
			RuntimeClassName:              tpl.RuntimeClass,
			TerminationGracePeriodSeconds: &grace,
			ActiveDeadlineSeconds:         deadline,
			InitContainers: []container{{
				Name: "agent-install", Image: b.cfg.AgentImage, ImagePullPolicy: b.cfg.ImagePullPolicy,
				Command:      []string{"/paddock-agent", "install", agentDir + "/paddock-agent"},
				VolumeMounts: []volumeMount{{Name: "agent", MountPath: agentDir}},
			}},
			Containers: []container{{
				Name: "sandbox", Image: tpl.Image, ImagePullPolicy: b.cfg.ImagePullPolicy,
				Command: append(b.agentArgs(), "--workdir", agent.DefaultWorkdir),
				Env:     env, WorkingDir: agent.DefaultWorkdir, Resources: res,
				VolumeMounts: []volumeMount{
					{Name: "agent", MountPath: agentDir, ReadOnly: true},
					{Name: "workspace", MountPath: agent.DefaultWorkdir},
					{Name: "token", MountPath: tokenMount, ReadOnly: true},
				},
			}},
			Volumes: []volume{{Name: "agent", EmptyDir: &emptyDir{}}, workspace,
				{Name: "token", Secret: &secretVolume{SecretName: podName(spec.ID), DefaultMode: 0o444}}},
		},
	}
}

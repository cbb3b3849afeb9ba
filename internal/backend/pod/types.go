package pod

// The few fields of core/v1 Pod the backend writes and reads (the plain
// REST client of internal/cluster/kube takes JSON-shaped structs).

type objectMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	OwnerReferences   []ownerReference  `json:"ownerReferences,omitempty"`
	DeletionTimestamp *string           `json:"deletionTimestamp,omitempty"`
}

type pod struct {
	APIVersion string     `json:"apiVersion,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Metadata   objectMeta `json:"metadata"`
	Spec       podSpec    `json:"spec"`
	Status     podStatus  `json:"status,omitzero"`
}

type podSpec struct {
	RestartPolicy                 string      `json:"restartPolicy"`
	AutomountServiceAccountToken  *bool       `json:"automountServiceAccountToken,omitempty"`
	EnableServiceLinks            *bool       `json:"enableServiceLinks,omitempty"`
	Hostname                      string      `json:"hostname,omitempty"`
	RuntimeClassName              string      `json:"runtimeClassName,omitempty"`
	TerminationGracePeriodSeconds *int64      `json:"terminationGracePeriodSeconds,omitempty"`
	ActiveDeadlineSeconds         *int64      `json:"activeDeadlineSeconds,omitempty"`
	InitContainers                []container `json:"initContainers,omitempty"`
	Containers                    []container `json:"containers"`
	Volumes                       []volume    `json:"volumes,omitempty"`
}

type container struct {
	Name            string        `json:"name"`
	Image           string        `json:"image"`
	ImagePullPolicy string        `json:"imagePullPolicy,omitempty"`
	Command         []string      `json:"command,omitempty"`
	Env             []envVar      `json:"env,omitempty"`
	WorkingDir      string        `json:"workingDir,omitempty"`
	VolumeMounts    []volumeMount `json:"volumeMounts,omitempty"`
	Resources       *resources    `json:"resources,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type resources struct {
	Limits   map[string]string `json:"limits,omitempty"`
	Requests map[string]string `json:"requests,omitempty"`
}

type volume struct {
	Name     string        `json:"name"`
	EmptyDir *emptyDir     `json:"emptyDir,omitempty"`
	Secret   *secretVolume `json:"secret,omitempty"`
}

type secretVolume struct {
	SecretName  string `json:"secretName"`
	DefaultMode int    `json:"defaultMode,omitempty"`
}

type emptyDir struct {
	SizeLimit string `json:"sizeLimit,omitempty"`
}

type podStatus struct {
	Phase                 string            `json:"phase,omitempty"`
	PodIP                 string            `json:"podIP,omitempty"`
	Reason                string            `json:"reason,omitempty"`
	Message               string            `json:"message,omitempty"`
	ContainerStatuses     []containerStatus `json:"containerStatuses,omitempty"`
	InitContainerStatuses []containerStatus `json:"initContainerStatuses,omitempty"`
}

type containerStatus struct {
	Name  string         `json:"name"`
	State containerState `json:"state"`
}

type containerState struct {
	Running *struct{} `json:"running,omitempty"`
	Waiting *struct {
		Reason  string `json:"reason,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"waiting,omitempty"`
	Terminated *struct {
		ExitCode int    `json:"exitCode"`
		Reason   string `json:"reason,omitempty"`
	} `json:"terminated,omitempty"`
}

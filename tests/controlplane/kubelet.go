package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	componentversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

const (
	// tickAnnotation makes a simulated container log `tick N` every interval
	// (a Go duration) after its args.
	tickAnnotation = "sim.farm.example.com/tick-interval"
	// leaseDuration and leaseRenewInterval are the kubelet's defaults.
	leaseDuration      = 40 * time.Second
	leaseRenewInterval = 10 * time.Second
	// nodeStatusInterval is how often the Ready condition's heartbeat is
	// refreshed (the kubelet reports at least every 5 minutes; the Lease is
	// the heartbeat that counts).
	nodeStatusInterval = time.Minute
	defaultScheduler   = v1.DefaultSchedulerName
	nodeIP             = "127.0.0.1"
)

// simKubelet is a simulated kubelet for one node, plus the part of a
// scheduler that binds pods to it: it registers the Node and keeps its Lease
// fresh, binds unscheduled pods to the node, reports the pods bound to it as
// running (nothing runs), deletes them when their deletion is requested, and
// serves the kubelet's HTTPS API that kube-apiserver calls for pods/log and
// pods/exec.
type simKubelet struct {
	nodeName  string
	client    kubernetes.Interface // as system:node:<nodeName>
	scheduler kubernetes.Interface // as system:kube-scheduler
	listener  net.Listener
	server    *http.Server
	port      int
	version   string

	pods        corelisters.PodLister // pods bound to the node
	unscheduled corelisters.PodLister // pods bound to no node
	podQueue    workqueue.TypedRateLimitingInterface[string]
	bindQueue   workqueue.TypedRateLimitingInterface[string]

	mu     sync.Mutex
	podIPs map[types.UID]string // each running pod's IP, 127.1.x.y
	nextIP int
}

// verboseWriter logs what is written to it at klog verbosity 2.
type verboseWriter struct{}

func (verboseWriter) Write(b []byte) (int, error) {
	klog.V(2).Info(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// kubeletVersion is the version the node reports: that of the build, as
// for kube-apiserver (e.g. v1.34.4).
func kubeletVersion() string { return componentversion.Get().GitVersion }

// newSimKubelet prepares the kubelet: its clients, its HTTPS listener on a
// free loopback port and its TLS configuration (serving certificate signed
// by ca.crt; client certificates signed by client-ca.crt are required, as
// kube-apiserver presents kubelet-client.crt).
func newSimKubelet(p paths, version string) (*simKubelet, error) {
	nodeConfig, err := clientcmd.BuildConfigFromFlags("", p.nodeKubeconfig)
	if err != nil {
		return nil, err
	}
	nodeConfig.UserAgent = "sim-kubelet"
	client, err := kubernetes.NewForConfig(nodeConfig)
	if err != nil {
		return nil, err
	}
	schedConfig, err := clientcmd.BuildConfigFromFlags("", p.schedulerKubeconfig)
	if err != nil {
		return nil, err
	}
	schedConfig.UserAgent = "sim-scheduler"
	scheduler, err := kubernetes.NewForConfig(schedConfig)
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(p.kubeletCrt, p.kubeletKey)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.clientCACrt)
	if err != nil {
		return nil, err
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", p.clientCACrt)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(nodeIP, "0"))
	if err != nil {
		return nil, fmt.Errorf("kubelet port: %w", err)
	}
	k := &simKubelet{
		nodeName:  nodeName,
		client:    client,
		scheduler: scheduler,
		listener:  listener,
		port:      listener.Addr().(*net.TCPAddr).Port,
		version:   version,
		podQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sim-kubelet-pods"}),
		bindQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sim-scheduler"}),
		podIPs: map[types.UID]string{},
	}
	k.server = &http.Server{
		Handler: k.handler(),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    clientCAs,
			MinVersion:   tls.VersionTLS12,
		},
		ReadHeaderTimeout: 30 * time.Second,
		// TLS handshake failures and the like are informational here.
		ErrorLog: log.New(verboseWriter{}, "sim-kubelet: ", 0),
	}
	return k, nil
}

// start registers the node, starts the informers and waits for their caches,
// and starts the workers and heartbeats; they run until ctx ends. It returns
// once the node is registered and Ready. serve then serves the HTTPS API.
func (k *simKubelet) start(ctx context.Context) error {
	if err := k.registerNode(ctx); err != nil {
		return fmt.Errorf("registering node %s: %w", k.nodeName, err)
	}
	if err := k.renewLease(ctx); err != nil {
		return fmt.Errorf("node lease: %w", err)
	}

	// The kubelet's view: pods bound to this node (the Node authorizer
	// allows a node to list and watch only these).
	nodeInformers := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=" + k.nodeName
		}))
	podInformer := nodeInformers.Core().V1().Pods()
	k.pods = podInformer.Lister()
	enqueue := func(q workqueue.TypedRateLimitingInterface[string]) func(obj any) {
		return func(obj any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
				q.Add(key)
			}
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue(k.podQueue),
		UpdateFunc: func(_, obj any) { enqueue(k.podQueue)(obj) },
		DeleteFunc: enqueue(k.podQueue),
	}); err != nil {
		return err
	}

	// The scheduler's view: pods bound to no node yet.
	schedInformers := informers.NewSharedInformerFactoryWithOptions(k.scheduler, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
		}))
	unscheduledInformer := schedInformers.Core().V1().Pods()
	k.unscheduled = unscheduledInformer.Lister()
	if _, err := unscheduledInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue(k.bindQueue),
		UpdateFunc: func(_, obj any) { enqueue(k.bindQueue)(obj) },
	}); err != nil {
		return err
	}

	nodeInformers.Start(ctx.Done())
	schedInformers.Start(ctx.Done())
	for name, synced := range map[string]cache.InformerSynced{
		"pods of the node": podInformer.Informer().HasSynced,
		"unscheduled pods": unscheduledInformer.Informer().HasSynced,
	} {
		if !cache.WaitForCacheSync(ctx.Done(), synced) {
			return fmt.Errorf("cache of %s not synced: %w", name, context.Cause(ctx))
		}
	}

	go func() {
		<-ctx.Done()
		k.podQueue.ShutDown()
		k.bindQueue.ShutDown()
	}()
	for range 2 {
		go wait.UntilWithContext(ctx, func(ctx context.Context) { k.work(ctx, k.podQueue, k.syncPod) }, time.Second)
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) { k.work(ctx, k.bindQueue, k.bind) }, time.Second)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "sim-kubelet: renewing the node lease")
		}
	}, leaseRenewInterval)
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := k.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "sim-kubelet: updating the node status")
		}
	}, nodeStatusInterval)
	return nil
}

// serve serves the kubelet's HTTPS API until ctx ends.
func (k *simKubelet) serve(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		_ = k.server.Close()
	}()
	err := k.server.ServeTLS(k.listener, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// work processes keys of q with sync until q shuts down; a failed key is
// retried with the queue's backoff.
func (k *simKubelet) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		if err := sync(ctx, key); err != nil {
			if ctx.Err() == nil {
				klog.V(2).InfoS("sim-kubelet: retrying", "queue", key, "err", err)
			}
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// nodeLabels are the well-known labels a kubelet sets on its Node.
func (k *simKubelet) nodeLabels() map[string]string {
	return map[string]string{
		v1.LabelHostname:          k.nodeName,
		v1.LabelOSStable:          goruntime.GOOS,
		v1.LabelArchStable:        goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
}

// nodeStatus is the status the kubelet reports: Ready, no pressure, room for
// 110 pods, reachable on 127.0.0.1 at the kubelet's port.
func (k *simKubelet) nodeStatus(now metav1.Time, transition func(v1.NodeConditionType) metav1.Time) v1.NodeStatus {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("8"),
		v1.ResourceMemory:           resource.MustParse("16Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	condition := func(t v1.NodeConditionType, status v1.ConditionStatus, reason, message string) v1.NodeCondition {
		return v1.NodeCondition{Type: t, Status: status, Reason: reason, Message: message,
			LastHeartbeatTime: now, LastTransitionTime: transition(t)}
	}
	return v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Phase:       "",
		Conditions: []v1.NodeCondition{
			condition(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
			condition(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
			condition(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
			condition(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
		},
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: nodeIP},
			{Type: v1.NodeHostName, Address: k.nodeName},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(k.port)}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               "sim-node-machine-id",
			SystemUUID:              "sim-node-system-uuid",
			BootID:                  string(uuid.NewUUID()),
			KernelVersion:           "simulated",
			OSImage:                 "farm-apiserver simulated kubelet",
			ContainerRuntimeVersion: "sim://" + k.version,
			KubeletVersion:          k.version,
			OperatingSystem:         goruntime.GOOS,
			Architecture:            goruntime.GOARCH,
		},
	}
}

// registerNode creates the Node (or takes over an existing one) and removes
// the not-ready taint the TaintNodesByCondition admission plugin puts on new
// nodes: no node lifecycle controller runs here to remove it once the node
// is Ready.
func (k *simKubelet) registerNode(ctx context.Context) error {
	now := metav1.Now()
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.nodeName, Labels: k.nodeLabels()},
		Status:     k.nodeStatus(now, func(v1.NodeConditionType) metav1.Time { return now }),
	}
	created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = k.client.CoreV1().Nodes().Get(ctx, k.nodeName, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	var taints []v1.Taint
	for _, t := range created.Spec.Taints {
		if t.Key != v1.TaintNodeNotReady {
			taints = append(taints, t)
		}
	}
	if len(taints) != len(created.Spec.Taints) {
		created.Spec.Taints = taints
		if created, err = k.client.CoreV1().Nodes().Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	created.Status = k.nodeStatus(now, func(v1.NodeConditionType) metav1.Time { return now })
	_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// updateNodeStatus refreshes the node's status and its conditions'
// heartbeat times.
func (k *simKubelet) updateNodeStatus(ctx context.Context) error {
	node, err := k.client.CoreV1().Nodes().Get(ctx, k.nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	node.Status = k.nodeStatus(now, func(t v1.NodeConditionType) metav1.Time {
		for _, c := range node.Status.Conditions {
			if c.Type == t {
				return c.LastTransitionTime
			}
		}
		return now
	})
	_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// renewLease creates or renews the node's Lease in kube-node-lease, the
// heartbeat a node lifecycle controller watches.
func (k *simKubelet) renewLease(ctx context.Context) error {
	leases := k.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, k.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err := k.client.CoreV1().Nodes().Get(ctx, k.nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: k.nodeName, Namespace: v1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(k.nodeName),
				LeaseDurationSeconds: ptr.To(int32(leaseDuration / time.Second)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// bind binds an unscheduled pod to the node, as kube-scheduler would with a
// single node that fits every pod: pods for another scheduler, pods being
// deleted and pods whose nodeSelector the node does not match stay Pending.
func (k *simKubelet) bind(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.unscheduled.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil ||
		(pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != defaultScheduler) ||
		!labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(k.nodeLabels())) {
		return nil
	}
	err = k.scheduler.CoreV1().Pods(namespace).Bind(ctx, &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: k.nodeName},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		klog.V(2).InfoS("sim-scheduler: bound", "pod", key, "node", k.nodeName)
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		// Gone, bound meanwhile, or its namespace is terminating.
		return nil
	default:
		return err
	}
}

// syncPod brings a pod bound to the node to what the kubelet reports: a pod
// being deleted is deleted at once (its containers "stop" instantly), any
// other pod is Running with all its containers running and ready.
func (k *simKubelet) syncPod(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.pods.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		k.sweepPodIPs()
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		err := k.client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		return nil
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || k.reported(pod) {
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = k.runningStatus(pod)
	_, err = k.client.CoreV1().Pods(namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or changed meanwhile: the informer brings the new version.
		return nil
	}
	return err
}

// sweepPodIPs drops the IPs of pods that are gone.
func (k *simKubelet) sweepPodIPs() {
	k.mu.Lock()
	defer k.mu.Unlock()
	keep := map[types.UID]bool{}
	if pods, err := k.pods.List(labels.Everything()); err == nil {
		for _, p := range pods {
			keep[p.UID] = true
		}
	}
	for uid := range k.podIPs {
		if !keep[uid] {
			delete(k.podIPs, uid)
		}
	}
}

// reported tells whether the pod's status already is what runningStatus
// reports: Running, with a running status for each container.
func (k *simKubelet) reported(pod *v1.Pod) bool {
	if pod.Status.Phase != v1.PodRunning || pod.Status.StartTime == nil ||
		len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) ||
		len(pod.Status.InitContainerStatuses) != len(pod.Spec.InitContainers) {
		return false
	}
	for i, c := range pod.Spec.Containers {
		s := pod.Status.ContainerStatuses[i]
		if s.Name != c.Name || s.State.Running == nil || !s.Ready {
			return false
		}
	}
	return true
}

// podIP returns the pod's IP: the node's for host-network pods, else one of
// 127.1.0.0/16 of its own (loopback, so nothing else can claim it).
func (k *simKubelet) podIP(pod *v1.Pod) string {
	if pod.Spec.HostNetwork {
		return nodeIP
	}
	if pod.Status.PodIP != "" {
		return pod.Status.PodIP
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.podIPs[pod.UID]; ok {
		return ip
	}
	k.nextIP++
	n := k.nextIP%65534 + 1
	ip := fmt.Sprintf("127.1.%d.%d", n/256, n%256)
	k.podIPs[pod.UID] = ip
	return ip
}

// runningStatus is the status of a pod whose containers all run since its
// start time (now, to the second, the first time: the API keeps seconds).
// Init containers have completed at that same time.
func (k *simKubelet) runningStatus(pod *v1.Pod) v1.PodStatus {
	start := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	if pod.Status.StartTime != nil {
		start = *pod.Status.StartTime
	}
	ip := k.podIP(pod)
	status := v1.PodStatus{
		ObservedGeneration: pod.Generation,
		Phase:              v1.PodRunning,
		HostIP:             nodeIP,
		HostIPs:            []v1.HostIP{{IP: nodeIP}},
		PodIP:              ip,
		PodIPs:             []v1.PodIP{{IP: ip}},
		StartTime:          &start,
		QOSClass:           pod.Status.QOSClass,
	}
	scheduled := start
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue {
			scheduled = c.LastTransitionTime
		}
	}
	for _, t := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		transition := start
		if t == v1.PodScheduled {
			transition = scheduled
		}
		status.Conditions = append(status.Conditions, v1.PodCondition{
			Type: t, Status: v1.ConditionTrue, LastTransitionTime: transition, ObservedGeneration: pod.Generation})
	}
	for _, c := range pod.Spec.InitContainers {
		s := containerStatus(pod, c)
		s.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: start, ContainerID: s.ContainerID}
		s.Ready = false
		s.Started = ptr.To(false)
		status.InitContainerStatuses = append(status.InitContainerStatuses, s)
	}
	for _, c := range pod.Spec.Containers {
		s := containerStatus(pod, c)
		s.State.Running = &v1.ContainerStateRunning{StartedAt: start}
		status.ContainerStatuses = append(status.ContainerStatuses, s)
	}
	return status
}

// containerStatus is a ready, started container of the pod, without state.
func containerStatus(pod *v1.Pod, c v1.Container) v1.ContainerStatus {
	digest := sha256.Sum256([]byte(c.Image))
	return v1.ContainerStatus{
		Name:         c.Name,
		Image:        c.Image,
		ImageID:      c.Image + "@sha256:" + hex.EncodeToString(digest[:]),
		ContainerID:  "sim://" + string(pod.UID) + "/" + c.Name,
		Ready:        true,
		Started:      ptr.To(true),
		RestartCount: 0,
	}
}

// tickInterval returns the pod's tick interval (0: no ticks).
func tickInterval(pod *v1.Pod) time.Duration {
	d, err := time.ParseDuration(pod.Annotations[tickAnnotation])
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

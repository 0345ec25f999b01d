package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/remotecommand"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/core/v1/validation"
	"k8s.io/kubernetes/pkg/features"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"
)

// The kubelet's HTTPS API, as far as kube-apiserver uses it for pods/log and
// pods/exec. Errors are answered as the kubelet answers them (see
// k8s.io/kubernetes/pkg/kubelet/server/server.go and validateContainerLogStatus
// in pkg/kubelet/kubelet_pods.go): the status code and the error's text as a
// plain body, which kube-apiserver turns into the Status the client sees.

const (
	// logTimestampFormat is the kubelet's fixed-width RFC 3339 format for
	// timestamps=true (RFC3339NanoFixed in k8s.io/cri-client/pkg/logs).
	logTimestampFormat = "2006-01-02T15:04:05.000000000Z07:00"
	// followPoll bounds how long a followed log waits before it checks that
	// its pod still runs.
	followPoll = time.Second
	// Exec streams: the kubelet's defaults (--streaming-connection-idle-timeout
	// 4h; stream creation 30s).
	execIdleTimeout           = 4 * time.Hour
	execStreamCreationTimeout = 30 * time.Second
)

func (k *simKubelet) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", k.containerLogs)
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", k.exec)
	mux.HandleFunc("/exec/{namespace}/{pod}/{uid}/{container}", k.exec)
	return mux
}

// writeKubeletError answers as go-restful's Response.WriteError does in the
// kubelet: the status code, then the error's text with no newline.
func writeKubeletError(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

// podByName returns a pod bound to the node.
func (k *simKubelet) podByName(namespace, name string) (*v1.Pod, bool) {
	pod, err := k.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil, false
	}
	return pod, true
}

// running tells whether the pod (the same one, by UID) is still bound to the
// node and not being deleted: a followed log ends when it is not.
func (k *simKubelet) running(namespace, name string, uid types.UID) bool {
	pod, ok := k.podByName(namespace, name)
	return ok && pod.UID == uid && pod.DeletionTimestamp == nil
}

// findContainer returns the spec of a container, init container or
// ephemeral container of the pod, and whether it is an init container.
func findContainer(pod *v1.Pod, name string) (c *v1.Container, init bool) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
			return &c, false
		}
	}
	return nil, false
}

// findStatus returns the status of a container of the pod.
func findStatus(pod *v1.Pod, name string) (*v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], true
			}
		}
	}
	return nil, false
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}, as
// the kubelet's getContainerLogs does.
func (k *simKubelet) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, podName, containerName := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	query := r.URL.Query()
	// The kubelet's backwards compatibility for the "tail" parameter.
	if tail := query.Get("tail"); tail != "" {
		query["tailLines"] = []string{tail}
		if tail == "all" {
			delete(query, "tailLines")
		}
	}
	apiOpts := &v1.PodLogOptions{}
	if err := legacyscheme.ParameterCodec.DecodeParameters(query, v1.SchemeGroupVersion, apiOpts); err != nil {
		writeKubeletError(w, http.StatusBadRequest, `{"message": "Unable to decode query."}`)
		return
	}
	splitStreams := utilfeature.DefaultFeatureGate.Enabled(features.PodLogsQuerySplitStreams)
	if splitStreams && apiOpts.Stream == nil {
		apiOpts.Stream = ptr.To(v1.LogStreamAll)
	}
	apiOpts.TypeMeta = metav1.TypeMeta{}
	if errs := validation.ValidatePodLogOptions(apiOpts); len(errs) > 0 {
		writeKubeletError(w, http.StatusUnprocessableEntity, `{"message": "Invalid request."}`)
		return
	}
	pod, ok := k.podByName(namespace, podName)
	if !ok {
		writeKubeletError(w, http.StatusNotFound, fmt.Sprintf("pod %q does not exist", podName))
		return
	}
	spec, init := findContainer(pod, containerName)
	if spec == nil {
		writeKubeletError(w, http.StatusNotFound, fmt.Sprintf("container %q not found in pod %q", containerName, podName))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeKubeletError(w, http.StatusInternalServerError, "unable to convert response into http.Flusher, cannot show logs")
		return
	}
	// Every line is on stdout: asking for stderr only gives nothing.
	stdout := true
	if splitStreams {
		switch *apiOpts.Stream {
		case v1.LogStreamStdout, v1.LogStreamAll:
		case v1.LogStreamStderr:
			stdout = false
		default:
			writeKubeletError(w, http.StatusBadRequest, fmt.Sprintf("invalid stream type %q", *apiOpts.Stream))
			return
		}
	} else if apiOpts.Stream != nil && *apiOpts.Stream != v1.LogStreamAll {
		writeKubeletError(w, http.StatusBadRequest, fmt.Sprintf("unable to return the given log stream: %q. Please enable PodLogsQuerySplitStreams feature gate in kubelet", *apiOpts.Stream))
		return
	}
	log, err := containerLogOf(pod, spec, init, containerName, apiOpts.Previous)
	if err != nil {
		writeKubeletError(w, http.StatusBadRequest, err.Error())
		return
	}
	var out io.Writer
	if stdout {
		out = w
	}
	opts := newLogOptions(apiOpts, time.Now())
	if !log.running {
		opts.follow = false
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	alive := func() bool { return k.running(pod.Namespace, pod.Name, pod.UID) }
	_ = log.stream(r.Context(), out, flusher.Flush, opts, alive, time.Now)
}

// containerLogOf checks the container's state as the kubelet's
// validateContainerLogStatus does and returns its log.
func containerLogOf(pod *v1.Pod, spec *v1.Container, init bool, containerName string, previous bool) (*containerLog, error) {
	status, found := findStatus(pod, containerName)
	if !found {
		return nil, fmt.Errorf("container %q in pod %q is not available", containerName, pod.Name)
	}
	if previous {
		// No container here has ever restarted, so there is no previous one.
		return nil, fmt.Errorf("previous terminated container %q in pod %q not found", containerName, pod.Name)
	}
	log := &containerLog{}
	for _, arg := range spec.Args {
		log.lines = append(log.lines, strings.Split(arg, "\n")...)
	}
	switch state := status.State; {
	case state.Running != nil:
		log.start = state.Running.StartedAt.Time
		log.running = true
		if !init {
			log.interval = tickInterval(pod)
		}
	case state.Terminated != nil:
		log.start = state.Terminated.StartedAt.Time
	case state.Waiting != nil:
		return nil, fmt.Errorf("container %q in pod %q is waiting to start: %v", containerName, pod.Name, state.Waiting.Reason)
	default:
		return nil, fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", containerName, pod.Name)
	}
	return log, nil
}

// logOptions are what the kubelet's log reader takes from PodLogOptions, as
// NewLogOptions in k8s.io/cri-client/pkg/logs computes them.
type logOptions struct {
	tail       int64 // last lines to show; -1: all
	limit      int64 // bytes to show at most; -1: no limit
	since      time.Time
	follow     bool
	timestamps bool
}

func newLogOptions(o *v1.PodLogOptions, now time.Time) logOptions {
	opts := logOptions{tail: -1, limit: -1, follow: o.Follow, timestamps: o.Timestamps}
	if o.TailLines != nil {
		opts.tail = *o.TailLines
	}
	if o.LimitBytes != nil {
		opts.limit = *o.LimitBytes
	}
	if o.SinceSeconds != nil {
		opts.since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.since) {
		opts.since = o.SinceTime.Time
	}
	return opts
}

// containerLog is a simulated container's log: its args, one line each, all
// written at start; then, while it runs and if interval > 0, `tick N`
// written at start + N*interval, for N = 1, 2, ...
type containerLog struct {
	start    time.Time
	lines    []string
	interval time.Duration
	running  bool
}

// logLine is one line of a log, without its newline.
type logLine struct {
	at   time.Time
	text string
}

// line returns line i (from 0) of the log.
func (l *containerLog) line(i int64) logLine {
	if i < int64(len(l.lines)) {
		return logLine{at: l.start, text: l.lines[i]}
	}
	n := i - int64(len(l.lines)) + 1
	return logLine{at: l.start.Add(time.Duration(n) * l.interval), text: "tick " + strconv.FormatInt(n, 10)}
}

// count returns how many lines the log has at now.
func (l *containerLog) count(now time.Time) int64 {
	c := int64(len(l.lines))
	if l.interval > 0 && l.running && !now.Before(l.start) {
		c += int64(now.Sub(l.start) / l.interval)
	}
	return c
}

// errLimitReached ends a log stream at limitBytes.
var errLimitReached = errors.New("limitBytes reached")

// stream writes the log to out (nil: skip every line, as for a stream that
// was not asked for) with the kubelet's semantics: the last tail lines, of
// them those not before since, with timestamps if asked, cut at limit
// bytes; with follow, then each new line as it is written (flushed at once)
// until ctx ends (the client went away) or alive reports the pod gone.
func (l *containerLog) stream(ctx context.Context, out io.Writer, flush func(), opts logOptions, alive func() bool, now func() time.Time) error {
	remain := opts.limit
	write := func(ln logLine) error {
		if ln.at.Before(opts.since) || out == nil {
			return nil
		}
		b := make([]byte, 0, len(logTimestampFormat)+len(ln.text)+2)
		if opts.timestamps {
			b = ln.at.UTC().AppendFormat(b, logTimestampFormat)
			b = append(b, ' ')
		}
		b = append(b, ln.text...)
		b = append(b, '\n')
		if remain >= 0 && int64(len(b)) > remain {
			b = b[:remain]
		}
		n, err := out.Write(b)
		if err != nil {
			return err
		}
		if remain >= 0 {
			remain -= int64(n)
			if remain <= 0 {
				return errLimitReached
			}
		}
		return nil
	}
	total := l.count(now())
	next := int64(0)
	if opts.tail >= 0 && opts.tail < total {
		next = total - opts.tail
	}
	finish := func(err error) error {
		flush()
		if errors.Is(err, errLimitReached) {
			return nil
		}
		return err
	}
	for ; next < total; next++ {
		if err := write(l.line(next)); err != nil {
			return finish(err)
		}
	}
	flush()
	if !opts.follow {
		return nil
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := followPoll
		if l.interval > 0 {
			wait = min(wait, max(0, l.line(next).at.Sub(now())))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if !alive() {
			return nil
		}
		wrote := false
		for total = l.count(now()); next < total; next++ {
			if err := write(l.line(next)); err != nil {
				return finish(err)
			}
			wrote = true
		}
		if wrote {
			flush()
		}
	}
}

// exec serves /exec/{namespace}/{pod}/[{uid}/]{container} (SPDY or
// WebSocket, as kube-apiserver proxies pods/exec), as the kubelet's getExec
// does but running the command itself: the simulated containers know only
// echo, cat, true and false.
func (k *simKubelet) exec(w http.ResponseWriter, r *http.Request) {
	namespace, podName, containerName := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	streamOpts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		writeKubeletError(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := k.podByName(namespace, podName)
	if !ok {
		writeKubeletError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	uid := types.UID(r.PathValue("uid"))
	status, found := findStatus(pod, containerName)
	if (uid != "" && uid != pod.UID) || !found || status.State.Running == nil {
		// What the kubelet's GetExec answers for a container the runtime
		// does not run, through streaming.WriteError.
		writeKubeletError(w, http.StatusInternalServerError, fmt.Sprintf("container not found (%q)", containerName))
		return
	}
	cmd := r.URL.Query()[v1.ExecCommandParam]
	remotecommandserver.ServeExec(w, r, simExecutor{}, pod.Name+"_"+pod.Namespace, pod.UID, containerName, cmd,
		streamOpts, execIdleTimeout, execStreamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

// simExecutor runs the commands of the simulated containers.
type simExecutor struct{}

// ExecInContainer runs cmd: `echo ARGS...` writes ARGS to stdout, `cat`
// copies stdin to stdout, `true` and `false` exit 0 and 1; any other command
// is not found.
func (simExecutor) ExecInContainer(_ context.Context, _ string, _ types.UID, _ string, cmd []string, in io.Reader, out, _ io.WriteCloser, tty bool, _ <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("failed to exec in container: no command")
	}
	newline := "\n"
	if tty {
		newline = "\r\n"
	}
	switch cmd[0] {
	case "echo":
		if out != nil {
			_, err := io.WriteString(out, strings.Join(cmd[1:], " ")+newline)
			return err
		}
		return nil
	case "cat":
		if in == nil {
			return nil
		}
		var w io.Writer = io.Discard
		if out != nil {
			w = out
		}
		_, err := io.Copy(w, in)
		return err
	case "true":
		return nil
	case "false":
		return utilexec.CodeExitError{Err: errors.New("exit status 1"), Code: 1}
	default:
		return fmt.Errorf("failed to exec in container: exec: %q: executable file not found in $PATH (a simulated container runs only echo, cat, true and false)", cmd[0])
	}
}

// simExecutor is what ServeExec runs commands with.
var _ remotecommandserver.Executor = simExecutor{}

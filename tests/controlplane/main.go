// Command controlplane runs a real Kubernetes control plane in one process on
// loopback, for tests and local development: embedded etcd, kube-apiserver
// (with the aggregator, front-proxy request-header authentication, RBAC) and
// kube-controller-manager (garbage collector, namespace, service account and
// service account token controllers, ...), and a simulated kubelet with its
// node, sim-node, that also binds pods to it (see kubelet.go): pods are
// scheduled, "run" (nothing is executed) and have logs and exec streams. With
// --no-kubelet there is no node and pods stay Pending.
//
// When it is ready it prints one line `READY {json}` on stdout (the same JSON
// as DIR/controlplane.json); everything else goes to stderr. It stops on
// SIGTERM/SIGINT or when its stdin is closed (unless --ignore-stdin), and
// removes what it created unless --keep.
//
// With --etcd-only it runs only the embedded etcd (optionally over TLS with
// client certificates, --etcd-tls), keeps its data and directory, and prints
// `READY {json}` with the etcd endpoint (see EtcdOnlyInfo). See README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

const (
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
	serviceClusterIPRange = "10.0.0.0/24"
	serviceClusterIP      = "10.0.0.1" // first IP of serviceClusterIPRange: the `kubernetes` service
	frontProxyClientName  = "front-proxy-client"
	adminName             = "controlplane-admin"
	userName              = "farm-user"
	userGroup             = "farm-users"
	controllerManagerName = "system:kube-controller-manager"
	// The simulated kubelet's node, and the users it and its scheduler act as.
	nodeName            = "sim-node"
	nodeUserName        = "system:node:" + nodeName
	nodesGroup          = "system:nodes"
	schedulerName       = "system:kube-scheduler"
	kubeletClientName   = "kube-apiserver-kubelet-client"
	kubeletAddressTypes = "InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP"
)

// Info is what controlplane.json and the READY line contain. All paths are absolute.
type Info struct {
	Server                      string   `json:"server"`
	Kubeconfig                  string   `json:"kubeconfig"`
	UserKubeconfig              string   `json:"userKubeconfig"`
	UserName                    string   `json:"userName"`
	UserGroups                  []string `json:"userGroups"`
	CAFile                      string   `json:"caFile"`
	CAKeyFile                   string   `json:"caKeyFile"`
	ClientCAFile                string   `json:"clientCAFile"`
	ClientCAKeyFile             string   `json:"clientCAKeyFile"`
	AdminCertFile               string   `json:"adminCertFile"`
	AdminKeyFile                string   `json:"adminKeyFile"`
	UserCertFile                string   `json:"userCertFile"`
	UserKeyFile                 string   `json:"userKeyFile"`
	FrontProxyCAFile            string   `json:"frontProxyCAFile"`
	FrontProxyCAKeyFile         string   `json:"frontProxyCAKeyFile"`
	FrontProxyClientCertFile    string   `json:"frontProxyClientCertFile"`
	FrontProxyClientKeyFile     string   `json:"frontProxyClientKeyFile"`
	RequestHeaderAllowedNames   []string `json:"requestHeaderAllowedNames"`
	ServiceAccountIssuer        string   `json:"serviceAccountIssuer"`
	ServiceAccountKeyFile       string   `json:"serviceAccountKeyFile"`
	ServiceAccountPublicKeyFile string   `json:"serviceAccountPublicKeyFile"`
	ServiceClusterIPRange       string   `json:"serviceClusterIPRange"`
	EtcdEndpoint                string   `json:"etcdEndpoint"`
	NodeName                    string   `json:"nodeName,omitempty"`
	KubeletPort                 int      `json:"kubeletPort,omitempty"`
	Dir                         string   `json:"dir"`
	Version                     string   `json:"version"`
	PID                         int      `json:"pid"`
}

// paths are the files the control plane uses, all inside one directory.
type paths struct {
	dir                                       string
	caCrt, caKey                              string
	apiserverCrt, apiserverKey                string
	clientCACrt, clientCAKey                  string
	adminCrt, adminKey                        string
	userCrt, userKey                          string
	kcmCrt, kcmKey                            string
	frontProxyCACrt, frontProxyCAKey          string
	frontProxyClientCrt, frontProxyClientKey  string
	saKey, saPub                              string
	kubeletCrt, kubeletKey                    string
	kubeletClientCrt, kubeletClientKey        string
	adminKubeconfig, userKubeconfig, kcmKubec string
	nodeKubeconfig, schedulerKubeconfig       string
	json                                      string
	etcdData                                  string
}

func newPaths(dir string) paths {
	j := func(name string) string { return filepath.Join(dir, name) }
	return paths{
		dir:   dir,
		caCrt: j("ca.crt"), caKey: j("ca.key"),
		apiserverCrt: j("apiserver.crt"), apiserverKey: j("apiserver.key"),
		clientCACrt: j("client-ca.crt"), clientCAKey: j("client-ca.key"),
		adminCrt: j("admin.crt"), adminKey: j("admin.key"),
		userCrt: j("user.crt"), userKey: j("user.key"),
		kcmCrt: j("controller-manager.crt"), kcmKey: j("controller-manager.key"),
		frontProxyCACrt: j("front-proxy-ca.crt"), frontProxyCAKey: j("front-proxy-ca.key"),
		frontProxyClientCrt: j("front-proxy-client.crt"), frontProxyClientKey: j("front-proxy-client.key"),
		saKey: j("sa.key"), saPub: j("sa.pub"),
		kubeletCrt: j("kubelet.crt"), kubeletKey: j("kubelet.key"),
		kubeletClientCrt: j("kubelet-client.crt"), kubeletClientKey: j("kubelet-client.key"),
		adminKubeconfig: j("admin.kubeconfig"), userKubeconfig: j("user.kubeconfig"), kcmKubec: j("controller-manager.kubeconfig"),
		nodeKubeconfig: j("node.kubeconfig"), schedulerKubeconfig: j("scheduler.kubeconfig"),
		json:     j("controlplane.json"),
		etcdData: j("etcd"),
	}
}

// all lists every file and directory the control plane creates in dir.
func (p paths) all() []string {
	return []string{
		p.caCrt, p.caKey, p.apiserverCrt, p.apiserverKey, p.clientCACrt, p.clientCAKey,
		p.adminCrt, p.adminKey, p.userCrt, p.userKey, p.kcmCrt, p.kcmKey,
		p.frontProxyCACrt, p.frontProxyCAKey, p.frontProxyClientCrt, p.frontProxyClientKey,
		p.saKey, p.saPub, p.kubeletCrt, p.kubeletKey, p.kubeletClientCrt, p.kubeletClientKey,
		p.adminKubeconfig, p.userKubeconfig, p.kcmKubec, p.nodeKubeconfig, p.schedulerKubeconfig, p.json, p.etcdData,
	}
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type cpOptions struct {
	dir            string
	port           int
	etcdPort       int
	keep           bool
	ignoreStdin    bool
	verbose        bool
	verbosity      int
	startupTimeout time.Duration
	apiserverArgs  multiFlag
	kcmArgs        multiFlag
	etcdOnly       bool // only etcd; its data and dir are kept
	etcdTLS        bool // etcd-only: clients over HTTPS with client certificates
	etcdSelfSigned bool // etcd-tls: a serving certificate that is its own CA
	noKubelet      bool // no simulated kubelet and node
}

func main() {
	os.Exit(run())
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controlplane: "+format+"\n", args...)
}

func run() int {
	var o cpOptions
	fs := flag.NewFlagSet("controlplane", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "directory for certificates, kubeconfigs, controlplane.json and etcd data (created if missing; default: a new temporary directory)")
	fs.IntVar(&o.port, "port", 0, "kube-apiserver secure port on 127.0.0.1 (0: a free port)")
	fs.IntVar(&o.etcdPort, "etcd-port", 0, "etcd client port on 127.0.0.1 (0: a free port)")
	fs.BoolVar(&o.keep, "keep", false, "keep the directory (certificates, kubeconfigs, etcd data) on exit")
	fs.BoolVar(&o.ignoreStdin, "ignore-stdin", false, "do not stop when stdin is closed (for running in a shell background)")
	fs.BoolVar(&o.verbose, "verbose", false, "log informational messages of etcd, kube-apiserver and kube-controller-manager (klog -v=2)")
	fs.IntVar(&o.verbosity, "v", -1, "klog verbosity (implies --verbose)")
	fs.DurationVar(&o.startupTimeout, "startup-timeout", 3*time.Minute, "give up if the control plane is not ready within this time")
	fs.Var(&o.apiserverArgs, "apiserver-arg", "extra kube-apiserver flag, e.g. --apiserver-arg=--feature-gates=Foo=true (repeatable)")
	fs.Var(&o.kcmArgs, "controller-manager-arg", "extra kube-controller-manager flag (repeatable)")
	fs.BoolVar(&o.noKubelet, "no-kubelet", false, "run no simulated kubelet: no node, pods stay Pending")
	fs.BoolVar(&o.etcdOnly, "etcd-only", false, "run only etcd (data in DIR/etcd, kept across runs; needs --dir)")
	fs.BoolVar(&o.etcdTLS, "etcd-tls", false, "with --etcd-only: serve etcd clients over HTTPS and require client certificates (certificates in DIR/etcd-pki, created if missing)")
	fs.BoolVar(&o.etcdSelfSigned, "etcd-self-signed-serving", false, "with --etcd-tls: serve a new self-signed CA:TRUE certificate (as openssl req -x509 makes one), given as etcdCAFile")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		logf("unexpected arguments: %q", fs.Args())
		return 2
	}
	if err := o.validate(fs); err != nil {
		logf("%v", err)
		return 2
	}
	if o.verbosity >= 0 {
		o.verbose = true
	} else if o.verbose {
		o.verbosity = 2
	} else {
		o.verbosity = 0
	}
	if err := setupLogging(o.verbose, o.verbosity); err != nil {
		logf("%v", err)
		return 2
	}

	// The reason we stop: a signal, stdin closed, or a component failing.
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGTERM, syscall.SIGINT)
	// If the parent dies and closes our stdout/stderr pipes, keep going until
	// stdin reports EOF and clean up, rather than being killed by SIGPIPE.
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		sig := <-sigCh
		stop(fmt.Errorf("%w: got %v", errRequested, sig))
		sig = <-sigCh
		logf("got %v again, exiting now", sig)
		os.Exit(1)
	}()
	if !o.ignoreStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop(fmt.Errorf("%w: stdin closed", errRequested))
		}()
	}

	cp := &controlPlane{opts: o}
	err := cp.start(ctx)
	if err == nil {
		select {
		case <-ctx.Done():
		case err = <-cp.failed:
			stop(err)
		}
	}
	if err == nil || ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	requested := errors.Is(err, errRequested)
	if requested {
		logf("shutting down (%v)", err)
	} else {
		logf("error: %v", err)
	}

	// Make sure we exit even if some component hangs while stopping.
	watchdog := time.AfterFunc(15*time.Second, func() {
		logf("shutdown takes too long, exiting")
		cp.cleanup()
		os.Exit(1)
	})
	cp.shutdown()
	cp.cleanup()
	watchdog.Stop()
	klog.Flush()
	logf("stopped")
	if requested {
		return 0
	}
	return 1
}

var errRequested = errors.New("stop requested")

// validate checks the combinations of flags.
func (o cpOptions) validate(fs *flag.FlagSet) error {
	if !o.etcdOnly {
		if o.etcdTLS {
			return errors.New("--etcd-tls needs --etcd-only")
		}
		if o.etcdSelfSigned {
			return errors.New("--etcd-self-signed-serving needs --etcd-only and --etcd-tls")
		}
		return nil
	}
	if o.dir == "" {
		return errors.New("--etcd-only needs --dir")
	}
	if o.etcdSelfSigned && !o.etcdTLS {
		return errors.New("--etcd-self-signed-serving needs --etcd-tls")
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "port", "apiserver-arg", "controller-manager-arg", "no-kubelet":
			if err == nil {
				err = fmt.Errorf("--%s cannot be used with --etcd-only", f.Name)
			}
		}
	})
	return err
}

// setupLogging sends klog output to stderr: everything up to the verbosity
// with --verbose or --v, else errors only (kube-apiserver warns a lot while
// starting, e.g. for each API version without resources).
func setupLogging(verbose bool, verbosity int) error {
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	set := map[string]string{"v": strconv.Itoa(verbosity)}
	if verbose {
		set["logtostderr"] = "true"
	} else {
		// Info and warnings go to the (discarded) output set below, errors
		// to stderr too.
		set["logtostderr"] = "false"
		set["alsologtostderr"] = "false"
		set["stderrthreshold"] = "ERROR"
	}
	for k, v := range set {
		if err := kfs.Set(k, v); err != nil {
			return fmt.Errorf("klog flag %s: %w", k, err)
		}
	}
	if !verbose {
		klog.SetOutput(io.Discard)
	}
	// kube-apiserver's loopback clients should not log self-issued warnings.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	return nil
}

type controlPlane struct {
	opts       cpOptions
	p          paths
	createdDir bool // dir did not exist: remove all of it
	wroteFiles bool // files were written into dir: remove them

	etcd *etcdServer

	componentsCancel context.CancelFunc
	apiserver        *component
	kcm              *component
	kubelet          *component
	failed           chan error // a component failed after start
}

// component is kube-apiserver or kube-controller-manager running in a goroutine.
type component struct {
	name string
	done chan struct{} // closed when it returned
	err  error         // what it returned
}

// goRun runs fn in a goroutine. If fn returns while ctx is not cancelled,
// that is reported on failed.
func goRun(ctx context.Context, name string, failed chan<- error, fn func() error) *component {
	c := &component{name: name, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = fn()
		if ctx.Err() == nil {
			failed <- fmt.Errorf("%s stopped: %v", name, c.err)
		}
	}()
	return c
}

// wait waits at most d for the component to return.
func (c *component) wait(d time.Duration) {
	if c == nil {
		return
	}
	select {
	case <-c.done:
		if c.err != nil {
			klog.V(1).InfoS("stopped with error", "component", c.name, "err", c.err)
		}
	case <-time.After(d):
		logf("%s did not stop within %v", c.name, d)
	}
}

func (cp *controlPlane) start(ctx context.Context) error {
	o := cp.opts
	ctx, cancel := context.WithTimeoutCause(ctx, o.startupTimeout, fmt.Errorf("control plane not ready after %v", o.startupTimeout))
	defer cancel()
	cp.failed = make(chan error, 4)

	// Directory.
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "controlplane-")
		if err != nil {
			return err
		}
		dir, cp.createdDir = d, true
	} else {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		dir = abs
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			cp.createdDir = true
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	cp.p = newPaths(dir)
	if o.etcdOnly {
		return cp.startEtcdOnly(ctx)
	}
	p := cp.p
	// A fresh cluster every time, even if a previous run used --keep.
	if err := os.RemoveAll(p.etcdData); err != nil {
		return err
	}
	cp.wroteFiles = true

	// Ports.
	apiListener, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("kube-apiserver port: %w", err)
	}
	apiPort := apiListener.Addr().(*net.TCPAddr).Port
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)

	// Certificates, keys and kubeconfigs.
	if err := writeCredentials(p, server); err != nil {
		apiListener.Close()
		return fmt.Errorf("writing certificates: %w", err)
	}

	// etcd.
	cp.etcd, err = startEtcd(ctx, etcdConfig{dataDir: p.etcdData, clientPort: o.etcdPort, verbose: o.verbose})
	if err != nil {
		apiListener.Close()
		return fmt.Errorf("etcd: %w", err)
	}
	cp.watchEtcd()

	componentsCtx, componentsCancel := context.WithCancel(context.Background())
	cp.componentsCancel = componentsCancel

	// kube-controller-manager's options must be built before kube-apiserver's
	// flags are registered (that closes the global feature gate to changes,
	// and kube-controller-manager's flag registration changes a default).
	kcm, err := newControllerManager(p, o.kcmArgs)
	if err != nil {
		apiListener.Close()
		return fmt.Errorf("kube-controller-manager options: %w", err)
	}

	// kube-apiserver.
	logf("starting kube-apiserver on %s", server)
	apiserverRun, err := newAPIServer(componentsCtx, apiListener, p, cp.etcd.endpoint, o.apiserverArgs)
	if err != nil {
		apiListener.Close()
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	cp.apiserver = goRun(componentsCtx, "kube-apiserver", cp.failed, apiserverRun)

	adminConfig, err := clientcmd.BuildConfigFromFlags("", p.adminKubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(adminConfig)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, cp.failed, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		var status int
		client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		return status == 200, nil
	}); err != nil {
		return err
	}

	// kube-controller-manager.
	logf("starting kube-controller-manager")
	kcmRun, err := kcm.prepare(componentsCtx)
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	cp.kcm = goRun(componentsCtx, "kube-controller-manager", cp.failed, kcmRun)

	// The simulated kubelet (and scheduler) of node sim-node, registered
	// while kube-controller-manager starts.
	var kubelet *simKubelet
	if !o.noKubelet {
		logf("starting the simulated kubelet of node %s", nodeName)
		kubelet, err = newSimKubelet(p, kubeletVersion())
		if err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		if err := kubelet.start(componentsCtx); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
		cp.kubelet = goRun(componentsCtx, "kubelet", cp.failed, func() error { return kubelet.serve(componentsCtx) })
	}

	if err := waitFor(ctx, cp.failed, "namespace default and service account default/default", func(ctx context.Context) (bool, error) {
		if _, err := client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		if _, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false, ignoreNotFound(err)
		}
		return true, nil
	}); err != nil {
		return err
	}
	version, err := client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}

	info := Info{
		Server:                      server,
		Kubeconfig:                  p.adminKubeconfig,
		UserKubeconfig:              p.userKubeconfig,
		UserName:                    userName,
		UserGroups:                  []string{userGroup},
		CAFile:                      p.caCrt,
		CAKeyFile:                   p.caKey,
		ClientCAFile:                p.clientCACrt,
		ClientCAKeyFile:             p.clientCAKey,
		AdminCertFile:               p.adminCrt,
		AdminKeyFile:                p.adminKey,
		UserCertFile:                p.userCrt,
		UserKeyFile:                 p.userKey,
		FrontProxyCAFile:            p.frontProxyCACrt,
		FrontProxyCAKeyFile:         p.frontProxyCAKey,
		FrontProxyClientCertFile:    p.frontProxyClientCrt,
		FrontProxyClientKeyFile:     p.frontProxyClientKey,
		RequestHeaderAllowedNames:   []string{frontProxyClientName},
		ServiceAccountIssuer:        serviceAccountIssuer,
		ServiceAccountKeyFile:       p.saKey,
		ServiceAccountPublicKeyFile: p.saPub,
		ServiceClusterIPRange:       serviceClusterIPRange,
		EtcdEndpoint:                cp.etcd.endpoint,
		Dir:                         p.dir,
		Version:                     version.GitVersion,
		PID:                         os.Getpid(),
	}
	if kubelet != nil {
		info.NodeName, info.KubeletPort = kubelet.nodeName, kubelet.port
	}
	pretty, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.json, append(pretty, '\n'), 0o644); err != nil {
		return err
	}
	line, err := json.Marshal(info)
	if err != nil {
		return err
	}
	logf("ready: %s (kubectl --kubeconfig %s)", server, p.adminKubeconfig)
	if _, err := fmt.Fprintf(os.Stdout, "READY %s\n", line); err != nil {
		return fmt.Errorf("writing READY to stdout: %w", err)
	}
	return nil
}

// watchEtcd reports on cp.failed when the running etcd fails.
func (cp *controlPlane) watchEtcd() {
	go func() {
		if err, ok := <-cp.etcd.Err(); ok && err != nil {
			select {
			case cp.failed <- fmt.Errorf("etcd: %w", err):
			default:
			}
		}
	}()
}

// shutdown stops kube-controller-manager, kube-apiserver and etcd, each with a
// time limit: kube-apiserver does not always stop all of its goroutines, and
// the process exits right after anyway.
func (cp *controlPlane) shutdown() {
	if cp.componentsCancel != nil {
		cp.componentsCancel()
	}
	cp.kubelet.wait(time.Second)
	cp.kcm.wait(3 * time.Second)
	cp.apiserver.wait(6 * time.Second)
	if cp.etcd != nil {
		cp.etcd.close(3 * time.Second)
	}
}

// cleanup removes what start created, unless --keep or --etcd-only.
func (cp *controlPlane) cleanup() {
	if cp.opts.keep || cp.opts.etcdOnly {
		if cp.p.dir != "" {
			logf("kept %s", cp.p.dir)
		}
		return
	}
	switch {
	case cp.createdDir && cp.p.dir != "":
		if err := os.RemoveAll(cp.p.dir); err != nil {
			logf("removing %s: %v", cp.p.dir, err)
		}
	case cp.wroteFiles:
		for _, f := range cp.p.all() {
			if err := os.RemoveAll(f); err != nil {
				logf("removing %s: %v", f, err)
			}
		}
	}
}

// waitFor polls cond until it is true, ctx ends or a component fails.
func waitFor(ctx context.Context, failed chan error, what string, cond func(context.Context) (bool, error)) error {
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-failed:
			failed <- err
			return false, err
		default:
		}
		reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		ok, err := cond(reqCtx)
		if err != nil {
			lastErr = err
		}
		return ok, nil
	})
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = cause
		}
		if lastErr != nil && !errors.Is(err, errRequested) {
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, err, lastErr)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// writeCredentials generates the CAs, certificates, keys and kubeconfigs.
func writeCredentials(p paths, server string) error {
	servingCA, err := newCA("controlplane-serving-ca")
	if err != nil {
		return err
	}
	clientCA, err := newCA("controlplane-client-ca")
	if err != nil {
		return err
	}
	frontProxyCA, err := newCA("controlplane-front-proxy-ca")
	if err != nil {
		return err
	}
	serving, err := servingCA.sign(leafSpec{
		commonName: "kube-apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		ips:    []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP(serviceClusterIP)},
		server: true,
	})
	if err != nil {
		return err
	}
	admin, err := clientCA.sign(leafSpec{commonName: adminName, organizations: []string{"system:masters"}})
	if err != nil {
		return err
	}
	user, err := clientCA.sign(leafSpec{commonName: userName, organizations: []string{userGroup}})
	if err != nil {
		return err
	}
	kcm, err := clientCA.sign(leafSpec{commonName: controllerManagerName, organizations: []string{"system:masters"}})
	if err != nil {
		return err
	}
	frontProxyClient, err := frontProxyCA.sign(leafSpec{commonName: frontProxyClientName})
	if err != nil {
		return err
	}
	// The simulated kubelet: its serving certificate (kube-apiserver verifies
	// it with ca.crt), the client certificate kube-apiserver presents to it,
	// and the users it registers its node and binds pods as.
	kubeletServing, err := servingCA.sign(leafSpec{
		commonName: nodeName,
		dnsNames:   []string{nodeName, "localhost"},
		ips:        []net.IP{net.ParseIP("127.0.0.1")},
		server:     true,
	})
	if err != nil {
		return err
	}
	kubeletClient, err := clientCA.sign(leafSpec{commonName: kubeletClientName, organizations: []string{"system:masters"}})
	if err != nil {
		return err
	}
	node, err := clientCA.sign(leafSpec{commonName: nodeUserName, organizations: []string{nodesGroup}})
	if err != nil {
		return err
	}
	scheduler, err := clientCA.sign(leafSpec{commonName: schedulerName})
	if err != nil {
		return err
	}
	for _, w := range []struct {
		kp       *keyPair
		crt, key string
	}{
		{servingCA, p.caCrt, p.caKey},
		{serving, p.apiserverCrt, p.apiserverKey},
		{clientCA, p.clientCACrt, p.clientCAKey},
		{admin, p.adminCrt, p.adminKey},
		{user, p.userCrt, p.userKey},
		{kcm, p.kcmCrt, p.kcmKey},
		{frontProxyCA, p.frontProxyCACrt, p.frontProxyCAKey},
		{frontProxyClient, p.frontProxyClientCrt, p.frontProxyClientKey},
		{kubeletServing, p.kubeletCrt, p.kubeletKey},
		{kubeletClient, p.kubeletClientCrt, p.kubeletClientKey},
	} {
		if err := w.kp.write(w.crt, w.key); err != nil {
			return err
		}
	}
	if err := writeServiceAccountKeys(p.saKey, p.saPub); err != nil {
		return err
	}
	for _, k := range []struct {
		file, user string
		kp         *keyPair
	}{
		{p.adminKubeconfig, adminName, admin},
		{p.userKubeconfig, userName, user},
		{p.kcmKubec, controllerManagerName, kcm},
		{p.nodeKubeconfig, nodeUserName, node},
		{p.schedulerKubeconfig, schedulerName, scheduler},
	} {
		if err := writeKubeconfig(k.file, server, servingCA, k.user, k.kp); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded).
func writeKubeconfig(file, server string, ca *keyPair, user string, kp *keyPair) error {
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	const name = "controlplane"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca.certPEM()}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM(), ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, file); err != nil {
		return err
	}
	return os.Chmod(file, 0o600)
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}

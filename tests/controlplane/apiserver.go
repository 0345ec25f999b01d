package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// newAPIServer builds kube-apiserver (with apiextensions-apiserver and the
// aggregator in front, as the kube-apiserver binary does) from its options,
// without its cobra command. The returned function runs it until ctx ends.
func newAPIServer(ctx context.Context, listener net.Listener, p paths, etcdEndpoint string, extraArgs []string) (func() error, error) {
	s := options.NewServerRunOptions()

	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	port := listener.Addr().(*net.TCPAddr).Port
	args := []string{
		"--etcd-servers=" + etcdEndpoint,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + p.dir,
		"--tls-cert-file=" + p.apiserverCrt,
		"--tls-private-key-file=" + p.apiserverKey,
		"--client-ca-file=" + p.clientCACrt,
		// Front proxy: the aggregator authenticates to aggregated API servers
		// with this client certificate and passes the user in these headers.
		"--requestheader-client-ca-file=" + p.frontProxyCACrt,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyClientCrt,
		"--proxy-client-key-file=" + p.frontProxyClientKey,
		"--enable-aggregator-routing=false",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--authorization-mode=Node,RBAC",
		// Calls to kubelets (pods/log, exec): a client certificate of
		// system:masters, the kubelet's serving certificate verified with
		// ca.crt, and the node's InternalIP first (its Hostname, sim-node,
		// resolves nowhere), as kubeadm configures it.
		"--kubelet-client-certificate=" + p.kubeletClientCrt,
		"--kubelet-client-key=" + p.kubeletClientKey,
		"--kubelet-certificate-authority=" + p.caCrt,
		"--kubelet-preferred-address-types=" + kubeletAddressTypes,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// The `kubernetes` service gets no endpoints: Endpoints and
		// EndpointSlices may not hold loopback addresses, so the lease
		// reconciler would only log errors for 127.0.0.1.
		"--endpoint-reconciler-type=none",
		// MutatingAdmissionPolicy is beta and off by default in kube 1.34:
		// served here so that farm-apiserver's policy plugin, which runs
		// only where the cluster serves the v1beta1 resources, is tested
		// against kube-apiserver's own for the Llama CRD.
		"--feature-gates=MutatingAdmissionPolicy=true",
		"--runtime-config=admissionregistration.k8s.io/v1beta1=true",
	}
	args = append(args, extraArgs...)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	// Serve on the listener we already hold, so the port cannot be taken.
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = port

	// What the command's PersistentPreRunE does.
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return nil, err
	}

	completed, err := s.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("complete options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return nil, fmt.Errorf("validate options: %w", utilerrors.NewAggregate(errs))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return nil, fmt.Errorf("complete config: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return nil, fmt.Errorf("create server chain: %w", err)
	}
	return func() error {
		prepared, err := server.PrepareRun()
		if err != nil {
			return err
		}
		return prepared.Run(ctx)
	}, nil
}

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
)

// controllers run by kube-controller-manager. No node, scheduling or workload
// controllers: there are no nodes.
var controllers = []string{
	names.GarbageCollectorController,           // garbage-collector-controller
	names.NamespaceController,                  // namespace-controller
	names.ServiceAccountController,             // serviceaccount-controller: the `default` service account of each namespace
	names.ServiceAccountTokenController,        // serviceaccount-token-controller
	names.RootCACertificatePublisherController, // root-ca-certificate-publisher-controller: kube-root-ca.crt config maps
	names.ClusterRoleAggregationController,     // clusterrole-aggregation-controller: aggregate-to-admin/edit/view
}

type controllerManager struct {
	s        *options.KubeControllerManagerOptions
	all      []string
	disabled []string
	aliases  map[string]string
}

// newControllerManager builds kube-controller-manager's options from its
// flags, without its cobra command. Call it before kube-apiserver's flags are
// registered.
func newControllerManager(p paths, extraArgs []string) (*controllerManager, error) {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	all, disabled, aliases := app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases()
	namedFlagSets := s.Flags(all, disabled, aliases)
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range namedFlagSets.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		// Client certificate in group system:masters.
		"--kubeconfig=" + p.kcmKubec,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		// No serving endpoint (healthz/metrics) needed.
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + p.saKey,
		"--root-ca-file=" + p.caCrt,
	}
	args = append(args, extraArgs...)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("flags: %w", err)
	}
	s.ParsedFlags = &namedFlagSets
	return &controllerManager{s: s, all: all, disabled: disabled, aliases: aliases}, nil
}

// prepare validates the options and builds the config; the returned function
// runs kube-controller-manager until ctx ends.
func (c *controllerManager) prepare(ctx context.Context) (func() error, error) {
	config, err := c.s.Config(ctx, c.all, c.disabled, c.aliases)
	if err != nil {
		return nil, err
	}
	completed := config.Complete()
	return func() error {
		return app.Run(ctx, completed)
	}, nil
}

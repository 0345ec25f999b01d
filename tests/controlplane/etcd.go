package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdServer is an embedded single-member etcd on 127.0.0.1: clients over
// plain HTTP, or HTTPS with client certificates required; peers over plain
// HTTP.
type etcdServer struct {
	e        *embed.Etcd
	endpoint string
	logLevel zap.AtomicLevel
}

// etcdConfig says how to run etcd.
type etcdConfig struct {
	dataDir    string // kept as it is: an existing member restarts with its data
	clientPort int    // 0: a free port
	peerPort   int    // 0: a free port
	verbose    bool
	tls        *etcdTLSFiles // nil: clients over plain HTTP
}

// etcdTLSFiles are the files of etcd's client TLS: clients must present a
// certificate signed by caFile.
type etcdTLSFiles struct {
	caFile, caKeyFile string
	serverCertFile    string // serving certificate (SANs 127.0.0.1, localhost)
	serverKeyFile     string
	clientCertFile    string // a client certificate (CN farm-apiserver)
	clientKeyFile     string
}

// startEtcd starts etcd, choosing a free port for each port left 0. A port
// found free can be taken by another process before etcd binds it (tests
// start servers on free ports all the time), so when a bind fails the ports
// are chosen again, a few times; a port given (a restart on the same port)
// is tried again after a pause, in case its holder was passing through.
func startEtcd(ctx context.Context, c etcdConfig) (*etcdServer, error) {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		chosen := c
		var err error
		if chosen.clientPort == 0 {
			if chosen.clientPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		if chosen.peerPort == 0 {
			if chosen.peerPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		logf("starting etcd on 127.0.0.1:%d (data in %s)", chosen.clientPort, c.dataDir)
		s, err := startEtcdOn(ctx, chosen)
		if err == nil || attempt == attempts || !errors.Is(err, syscall.EADDRINUSE) {
			return s, err
		}
		logf("etcd could not bind its ports (%v); trying again", err)
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcdOn starts etcd on the ports of c.
func startEtcdOn(ctx context.Context, c etcdConfig) (*etcdServer, error) {
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = c.dataDir
	scheme := "http"
	if c.tls != nil {
		scheme = "https"
		ti := &cfg.ClientTLSInfo
		ti.CertFile = c.tls.serverCertFile
		ti.KeyFile = c.tls.serverKeyFile
		ti.TrustedCAFile = c.tls.caFile
		ti.ClientCertAuth = true
		// etcd's grpc-gateway (the JSON API on /v3/...) dials etcd's own
		// gRPC server with this TLS configuration: without a client
		// certificate of its own it would present the serving one, which
		// has no client auth usage and is rejected.
		ti.ClientCertFile = c.tls.clientCertFile
		ti.ClientKeyFile = c.tls.clientKeyFile
	}
	clientURL := mustURL(fmt.Sprintf("%s://127.0.0.1:%d", scheme, c.clientPort))
	peerURL := mustURL(fmt.Sprintf("http://127.0.0.1:%d", c.peerPort))
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	// No fsync: the data survives the process being killed (it is in the
	// page cache), only not a crash of the machine, which tests do not need.
	cfg.UnsafeNoFsync = true
	// etcd logs (zap, JSON) to stderr: errors only, or warnings too with
	// --verbose. The level is raised while stopping: closing the listeners
	// logs errors.
	logLevel := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	if c.verbose {
		logLevel.SetLevel(zapcore.WarnLevel)
	}
	encoderConfig := zap.NewProductionEncoderConfig()
	encoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(encoderConfig), zapcore.Lock(zapcore.AddSync(os.Stderr)), logLevel),
		zap.AddCaller()).Named("etcd")
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{"stderr"}
	cfg.LogLevel = logLevel.Level().String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed while starting: %w", err)
	case <-ctx.Done():
		logLevel.SetLevel(zapcore.FatalLevel)
		e.Close()
		return nil, context.Cause(ctx)
	}
	return &etcdServer{e: e, endpoint: clientURL.String(), logLevel: logLevel}, nil
}

// Err reports errors of the running server.
func (s *etcdServer) Err() <-chan error { return s.e.Err() }

// close stops etcd, waiting at most d.
func (s *etcdServer) close(d time.Duration) {
	s.logLevel.SetLevel(zapcore.FatalLevel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.e.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		logf("etcd did not stop within %v", d)
	}
}

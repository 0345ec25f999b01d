package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// etcdServer is an embedded single-member etcd on 127.0.0.1, plain HTTP.
type etcdServer struct {
	e        *embed.Etcd
	endpoint string
	logLevel zap.AtomicLevel
}

func startEtcd(ctx context.Context, dataDir string, clientPort, peerPort int, verbose bool) (*etcdServer, error) {
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = dataDir
	clientURL := mustURL(fmt.Sprintf("http://127.0.0.1:%d", clientPort))
	peerURL := mustURL(fmt.Sprintf("http://127.0.0.1:%d", peerPort))
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	// The data is thrown away at exit: no need to survive a power failure.
	cfg.UnsafeNoFsync = true
	// etcd logs (zap, JSON) to stderr: errors only, or warnings too with
	// --verbose. The level is raised while stopping: closing the listeners
	// logs errors.
	logLevel := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	if verbose {
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

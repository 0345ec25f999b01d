package main

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/util/keyutil"
)

// EtcdOnlyInfo is what the READY line holds with --etcd-only. All paths are
// absolute; the three files are set only with --etcd-tls.
type EtcdOnlyInfo struct {
	EtcdEndpoint string `json:"etcdEndpoint"`           // http(s)://127.0.0.1:PORT
	EtcdCAFile   string `json:"etcdCAFile,omitempty"`   // what clients trust etcd's serving certificate by
	EtcdCertFile string `json:"etcdCertFile,omitempty"` // client certificate (CN farm-apiserver)
	EtcdKeyFile  string `json:"etcdKeyFile,omitempty"`  // its key
	Dir          string `json:"dir"`
}

// etcdClientName is the common name of the client certificate of --etcd-tls.
const etcdClientName = "farm-apiserver"

// startEtcdOnly starts only etcd, on the data in DIR/etcd as it is (a new
// member if there is none), and prints READY.
func (cp *controlPlane) startEtcdOnly(ctx context.Context) error {
	o := cp.opts
	p := cp.p
	var tlsFiles *etcdTLSFiles
	if o.etcdTLS {
		dir := filepath.Join(p.dir, "etcd-pki")
		f, err := ensureEtcdPKI(dir)
		if err != nil {
			return fmt.Errorf("etcd certificates: %w", err)
		}
		if o.etcdSelfSigned {
			// etcd still checks clients against the CA; clients trust the
			// server by its own certificate.
			f.serverCertFile = filepath.Join(dir, "server-self-signed.crt")
			f.serverKeyFile = filepath.Join(dir, "server-self-signed.key")
			kp, err := newSelfSignedServing("etcd")
			if err != nil {
				return fmt.Errorf("etcd self-signed certificate: %w", err)
			}
			if err := kp.write(f.serverCertFile, f.serverKeyFile); err != nil {
				return fmt.Errorf("etcd self-signed certificate: %w", err)
			}
		}
		tlsFiles = &f
	}

	// The peer port is chosen anew, so the peer URL stored in the member
	// changes from run to run: harmless for a single member, which never
	// dials its peers.
	var err error
	cp.etcd, err = startEtcd(ctx, etcdConfig{
		dataDir:    p.etcdData,
		clientPort: o.etcdPort,
		verbose:    o.verbose,
		tls:        tlsFiles,
	})
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	cp.watchEtcd()

	info := EtcdOnlyInfo{EtcdEndpoint: cp.etcd.endpoint, Dir: p.dir}
	if tlsFiles != nil {
		info.EtcdCAFile = tlsFiles.caFile
		if o.etcdSelfSigned {
			info.EtcdCAFile = tlsFiles.serverCertFile
		}
		info.EtcdCertFile = tlsFiles.clientCertFile
		info.EtcdKeyFile = tlsFiles.clientKeyFile
	}
	line, err := json.Marshal(info)
	if err != nil {
		return err
	}
	logf("ready: etcd %s", info.EtcdEndpoint)
	if _, err := fmt.Fprintf(os.Stdout, "READY %s\n", line); err != nil {
		return fmt.Errorf("writing READY to stdout: %w", err)
	}
	return nil
}

// ensureEtcdPKI makes sure dir holds a CA, a serving certificate for
// 127.0.0.1/localhost and a client certificate signed by it. What is there
// is kept (so clients of an earlier run still trust the server); what is
// missing is created, and everything is re-created when the CA is missing.
func ensureEtcdPKI(dir string) (etcdTLSFiles, error) {
	j := func(name string) string { return filepath.Join(dir, name) }
	f := etcdTLSFiles{
		caFile: j("ca.crt"), caKeyFile: j("ca.key"),
		serverCertFile: j("server.crt"), serverKeyFile: j("server.key"),
		clientCertFile: j("client.crt"), clientKeyFile: j("client.key"),
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, err
	}
	ca, err := loadKeyPair(f.caFile, f.caKeyFile)
	newCAMade := false
	switch {
	case errors.Is(err, os.ErrNotExist):
		if ca, err = newCA("controlplane-etcd-ca"); err != nil {
			return f, err
		}
		if err := ca.write(f.caFile, f.caKeyFile); err != nil {
			return f, err
		}
		newCAMade = true
	case err != nil:
		return f, err
	}
	for _, l := range []struct {
		crt, key string
		spec     leafSpec
	}{
		{f.serverCertFile, f.serverKeyFile, leafSpec{
			commonName: "etcd",
			dnsNames:   []string{"localhost"},
			ips:        []net.IP{net.ParseIP("127.0.0.1")},
			server:     true,
		}},
		{f.clientCertFile, f.clientKeyFile, leafSpec{commonName: etcdClientName}},
	} {
		if !newCAMade {
			kp, err := loadKeyPair(l.crt, l.key)
			if err == nil && kp.cert.CheckSignatureFrom(ca.cert) == nil {
				continue
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return f, err
			}
		}
		kp, err := ca.sign(l.spec)
		if err != nil {
			return f, err
		}
		if err := kp.write(l.crt, l.key); err != nil {
			return f, err
		}
	}
	return f, nil
}

// loadKeyPair reads a PEM certificate and its PEM private key (as written by
// keyPair.write). The error wraps os.ErrNotExist when either file is missing.
func loadKeyPair(certFile, keyFile string) (*keyPair, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", certFile)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	k, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: unsupported private key type %T", keyFile, k)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s", keyFile, certFile)
	}
	return &keyPair{cert: cert, key: key}, nil
}

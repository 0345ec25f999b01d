package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"k8s.io/client-go/util/keyutil"
)

// certValidity is how long every generated certificate is valid.
const certValidity = 365 * 24 * time.Hour

// keyPair is a certificate and its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newKey() (crypto.Signer, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// newCA makes a self-signed CA.
func newCA(commonName string) (*keyPair, error) {
	return newSelfSigned(x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
}

// newSelfSignedServing makes a serving certificate for 127.0.0.1 and
// localhost that is its own CA (CA:TRUE), as `openssl req -x509` makes one:
// clients trust the server by this very certificate.
func newSelfSignedServing(commonName string) (*keyPair, error) {
	return newSelfSigned(x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
	})
}

// newSelfSigned signs tmpl with a new key of its own, valid from an hour ago
// for certValidity.
func newSelfSigned(tmpl x509.Certificate) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = randomSerial(); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(certValidity)
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

// leafSpec describes a certificate signed by a CA.
type leafSpec struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	server        bool // serving certificate (else client certificate)
}

func (ca *keyPair) sign(spec leafSpec) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	usage := x509.ExtKeyUsageClientAuth
	if spec.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.commonName, Organization: spec.organizations},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		DNSNames:              spec.dnsNames,
		IPAddresses:           spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func (kp *keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

func (kp *keyPair) keyPEM() ([]byte, error) {
	return keyutil.MarshalPrivateKeyToPEM(kp.key)
}

// write stores the certificate at certFile and, if keyFile is not empty, the
// private key (mode 0600) at keyFile.
func (kp *keyPair) write(certFile, keyFile string) error {
	if err := os.WriteFile(certFile, kp.certPEM(), 0o644); err != nil {
		return err
	}
	if keyFile == "" {
		return nil
	}
	keyPEM, err := kp.keyPEM()
	if err != nil {
		return err
	}
	return os.WriteFile(keyFile, keyPEM, 0o600)
}

// writeServiceAccountKeys generates the RSA key kube-apiserver signs service
// account tokens with (and kube-controller-manager's token controller too),
// and its public half used to verify them.
func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("marshal service account public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubFile, pubPEM, 0o644)
}

package main

// `franz-probe secure`: one client with TLS and SASL settings against a
// secured listener (tests/e2e/test_tls_clients.py).
//
//	franz-probe secure [-ca FILE] [-cert FILE -key FILE] [-sasl MECHANISM -user NAME -password WORD] [-log LEVEL] BOOTSTRAP TOPIC
//
// -ca turns TLS on: the server's certificate must chain to the PEM CA in FILE
// and name the host dialed (kgo.DialTLSConfig). -cert and -key (PEM) are the
// client certificate. -sasl is SCRAM-SHA-256 or PLAIN (pkg/sasl/scram,
// pkg/sasl/plain). TOPIC is an existing one-partition topic, written to and
// read by nobody else. Prints, as the Java probe's secure-client scenario:
//
//	connect: ok | REFUSAL     Metadata for no topic (kadm ListBrokers), which needs no ACL
//	produce: ok | REFUSAL     one record, value "franz TOPIC", with the default idempotent producer
//	consume: VALUE | REFUSAL  the first record of partition 0, consumed directly (no group)
//
// REFUSAL names what the client reported: `kafka-error NAME` for a Kafka
// error code (kerr), `tls-verify: MESSAGE` when this client refused the
// server's certificate (tls.CertificateVerificationError), `tls-alert:
// MESSAGE` when the server ended the handshake with an alert, else `error:
// MESSAGE`. Nothing is tried after a refused connect. Exit status 0 when the
// lines were printed (a refusal is a result), 1 when a record did not arrive
// in time, 2 on bad arguments.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const secureTimeout = 20 * time.Second

func runSecure(args []string) int {
	fs := flag.NewFlagSet("secure", flag.ContinueOnError)
	ca := fs.String("ca", "", "PEM CA the server's certificate must chain to (turns TLS on)")
	cert := fs.String("cert", "", "PEM client certificate")
	key := fs.String("key", "", "PEM key of -cert")
	mechanism := fs.String("sasl", "", "SASL mechanism: SCRAM-SHA-256 or PLAIN")
	user := fs.String("user", "", "SASL user")
	password := fs.String("password", "", "SASL password")
	logLevel := fs.String("log", "warn", "client log level on stderr: none, error, warn, info, debug")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level, ok := logLevels[*logLevel]
	if fs.NArg() != 2 || !ok || (*cert == "") != (*key == "") {
		fmt.Fprintln(os.Stderr, "usage: franz-probe secure [-ca FILE] [-cert FILE -key FILE] "+
			"[-sasl MECHANISM -user NAME -password WORD] [-log LEVEL] BOOTSTRAP TOPIC")
		return 2
	}
	bootstrap, topic := fs.Arg(0), fs.Arg(1)
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, func() string { return "[franz-probe secure] " })),
		kgo.RetryTimeout(secureTimeout / 2),
	}
	if *ca != "" {
		config, err := tlsConfig(*ca, *cert, *key)
		if err != nil {
			fmt.Fprintf(os.Stderr, "franz-probe secure: %v\n", err)
			return 2
		}
		opts = append(opts, kgo.DialTLSConfig(config))
	}
	switch *mechanism {
	case "":
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: *user, Pass: *password}.AsSha256Mechanism()))
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: *user, Pass: *password}.AsMechanism()))
	default:
		fmt.Fprintf(os.Stderr, "franz-probe secure: unknown SASL mechanism %q\n", *mechanism)
		return 2
	}

	connected := "ok"
	if err := secureCall(func(ctx context.Context) error {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = kadm.NewClient(cl).ListBrokers(ctx)
		return err
	}); err != nil {
		connected = refusal(err)
	}
	fmt.Printf("connect: %s\n", connected)
	if connected != "ok" {
		return 0
	}

	produced := "ok"
	if err := secureCall(func(ctx context.Context) error {
		cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return err
		}
		defer cl.Close()
		r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("franz " + topic)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
		if r.Offset != 0 {
			return fmt.Errorf("the one record acknowledged at offset %d, want 0", r.Offset)
		}
		return nil
	}); err != nil {
		produced = refusal(err)
	}
	fmt.Printf("produce: %s\n", produced)

	consumed, err := secureConsume(opts, topic)
	if err != nil {
		fmt.Fprintf(os.Stderr, "franz-probe secure: %v\n", err)
		return 1
	}
	fmt.Printf("consume: %s\n", consumed)
	return 0
}

// secureCall runs fn with its own deadline.
func secureCall(fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), secureTimeout)
	defer cancel()
	return fn(ctx)
}

func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", ca)
	}
	// ServerName is left empty: kgo sets it to the host of each broker it dials.
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// secureConsume reads the first record of partition 0, or the refusal the
// client reports; an error when neither came before the deadline.
func secureConsume(opts []kgo.Opt, topic string) (string, error) {
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return refusal(err), nil
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), secureTimeout)
	defer cancel()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return "", fmt.Errorf("no record of %s within %s", topic, secureTimeout)
		}
		for _, fe := range fetches.Errors() {
			return refusal(fe.Err), nil
		}
		if records := fetches.Records(); len(records) > 0 {
			return string(records[0].Value), nil
		}
	}
}

// refusal names the error as the output shows it (see the comment at the top).
func refusal(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return "kafka-error " + ke.Message
	}
	if ve, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return "tls-verify: " + ve.Err.Error()
	}
	// Go reports an alert the peer sent as a net.OpError whose Op is "remote error".
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return "tls-alert: " + oe.Err.Error()
	}
	return "error: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

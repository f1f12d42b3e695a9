package fencetest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/fence/internal/fencesuite"
)

// azureBlobs is a fence.ObjectStore over the Azure Blob REST API (Put Blob
// with If-Match / If-None-Match: *, the token in x-ms-meta-fencingtoken),
// signed with Shared Key — here against Azurite, the Azure Storage
// emulator, with its well-known development account.
type azureBlobs struct {
	endpoint  string // http://127.0.0.1:port
	account   string
	key       []byte
	container string
	client    *http.Client
}

const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	azureVersion   = "2021-08-06"
	tokenMeta      = "x-ms-meta-fencingtoken"
)

func (a *azureBlobs) blobURL(key string) string {
	return a.endpoint + "/" + a.account + "/" + a.container + "/" + url.PathEscape(key)
}

// sign adds the x-ms headers and the Shared Key authorization to req.
func (a *azureBlobs) sign(req *http.Request, contentLength int) {
	req.Header.Set("x-ms-date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("x-ms-version", azureVersion)
	var ms []string
	for k := range req.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-ms-") {
			ms = append(ms, lk)
		}
	}
	sort.Strings(ms)
	var canon strings.Builder
	for _, k := range ms {
		canon.WriteString(k + ":" + strings.TrimSpace(req.Header.Get(k)) + "\n")
	}
	length := ""
	if contentLength > 0 {
		length = strconv.Itoa(contentLength)
	}
	resource := "/" + a.account + req.URL.EscapedPath()
	q := req.URL.Query()
	var names []string
	for k := range q {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		resource += "\n" + strings.ToLower(k) + ":" + strings.Join(q[k], ",")
	}
	toSign := strings.Join([]string{req.Method, "", "", length, "", req.Header.Get("Content-Type"), "",
		"", req.Header.Get("If-Match"), req.Header.Get("If-None-Match"), "", ""}, "\n") + "\n" + canon.String() + resource
	mac := hmac.New(sha256.New, a.key)
	mac.Write([]byte(toSign))
	req.Header.Set("Authorization", "SharedKey "+a.account+":"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
}

func (a *azureBlobs) do(req *http.Request, body []byte) (*http.Response, []byte, error) {
	a.sign(req, len(body))
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, b, err
}

func (a *azureBlobs) createContainer(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, a.endpoint+"/"+a.account+"/"+a.container+"?restype=container", nil)
	resp, body, err := a.do(req, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
		return fmt.Errorf("create container: %s: %s", resp.Status, body)
	}
	return nil
}

func (a *azureBlobs) Get(ctx context.Context, key string) (fence.StoredObject, bool, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.blobURL(key), nil)
	resp, body, err := a.do(req, nil)
	switch {
	case err != nil:
		return fence.StoredObject{}, false, err
	case resp.StatusCode == http.StatusNotFound:
		return fence.StoredObject{}, false, nil
	case resp.StatusCode != http.StatusOK:
		return fence.StoredObject{}, false, fmt.Errorf("get %q: %s: %s", key, resp.Status, body)
	}
	var tok uint64
	if v := resp.Header.Get(tokenMeta); v != "" {
		if tok, err = strconv.ParseUint(v, 10, 64); err != nil {
			return fence.StoredObject{}, false, fmt.Errorf("get %q: token %q: %w", key, v, err)
		}
	}
	return fence.StoredObject{Body: body, Token: tok, Version: resp.Header.Get("ETag")}, true, nil
}

func (a *azureBlobs) Put(ctx context.Context, key string, body []byte, token uint64, ifVersion string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, a.blobURL(key), bytes.NewReader(body))
	req.Header.Set("x-ms-blob-type", "BlockBlob")
	req.Header.Set(tokenMeta, strconv.FormatUint(token, 10))
	req.Header.Set("Content-Type", "application/octet-stream")
	if ifVersion == "" {
		req.Header.Set("If-None-Match", "*")
	} else {
		req.Header.Set("If-Match", ifVersion)
	}
	resp, rbody, err := a.do(req, body)
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusCreated:
		return nil
	case resp.StatusCode == http.StatusPreconditionFailed, resp.StatusCode == http.StatusConflict:
		return fmt.Errorf("put %q: %s: %w", key, resp.Status, fence.ErrPrecondition)
	}
	return fmt.Errorf("put %q: %s: %s", key, resp.Status, rbody)
}

// delete removes a blob (the suite's Forget).
func (a *azureBlobs) delete(ctx context.Context, key string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, a.blobURL(key), nil)
	resp, body, err := a.do(req, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("delete %q: %s: %s", key, resp.Status, body)
	}
	return nil
}

// azureStore is the suite's Store over fence.Object on Azurite: the blob's
// body is "current\nlog…", updated read-modify-write.
type azureStore struct {
	blobs *azureBlobs
	f     *fence.Object
}

func (s *azureStore) Write(ctx context.Context, resource string, token uint64, value string) error {
	return s.f.Update(ctx, resource, token, func(body []byte, exists bool) ([]byte, error) {
		_, log := decodeLog(body, exists)
		return encodeLog(value, append(log, value)), nil
	})
}

func (s *azureStore) State(ctx context.Context, resource string) (string, []string, error) {
	o, ok, err := s.blobs.Get(ctx, resource)
	if err != nil {
		return "", nil, err
	}
	cur, log := decodeLog(o.Body, ok)
	return cur, log, nil
}

func (s *azureStore) Highest(ctx context.Context, resource string) (uint64, error) {
	return s.f.Highest(ctx, resource)
}

// Forget deletes the blob if token is current (the object's token dies
// with it; see fence.Object).
func (s *azureStore) Forget(ctx context.Context, resource string, token uint64) error {
	h, err := s.f.Highest(ctx, resource)
	if err != nil || h == 0 {
		return err
	}
	if token < h {
		return fmt.Errorf("%w: %d < %d", fence.ErrStaleToken, token, h)
	}
	return s.blobs.delete(ctx, resource)
}

func encodeLog(cur string, log []string) []byte {
	parts := []string{strconv.Quote(cur)}
	for _, v := range log {
		parts = append(parts, strconv.Quote(v))
	}
	return []byte(strings.Join(parts, "\n"))
}

func decodeLog(body []byte, exists bool) (string, []string) {
	if !exists {
		return "", nil
	}
	var vals []string
	for _, l := range strings.Split(string(body), "\n") {
		v, err := strconv.Unquote(l)
		if err != nil {
			panic(fmt.Sprintf("corrupt test blob line %q", l))
		}
		vals = append(vals, v)
	}
	return vals[0], vals[1:]
}

// The suite on Azurite (Azure Blob Storage's emulator): a real server with
// conditional writes. No local S3 or GCS server with conditional writes is
// available here.
func TestAzureBlobObjectFence(t *testing.T) {
	endpoint := server(t, "RAFTLOCK_TEST_AZURITE")
	key, _ := base64.StdEncoding.DecodeString(azuriteKey)
	blobs := &azureBlobs{endpoint: endpoint, account: azuriteAccount, key: key,
		container: fmt.Sprintf("fence%d", time.Now().UnixNano()), client: &http.Client{Timeout: 30 * time.Second}}
	defer blobs.client.CloseIdleConnections()
	ctx := context.Background()
	if err := blobs.createContainer(ctx); err != nil {
		t.Fatalf("Azurite at %s: %v", endpoint, err)
	}
	// The conditions themselves, on the server: a second create and a
	// write against an old ETag both fail.
	if err := blobs.Put(ctx, "probe", []byte("a"), 1, ""); err != nil {
		t.Fatal(err)
	}
	o, _, err := blobs.Get(ctx, "probe")
	if err != nil || o.Token != 1 {
		t.Fatalf("probe: %+v, %v", o, err)
	}
	if err := blobs.Put(ctx, "probe", []byte("b"), 2, ""); !errors.Is(err, fence.ErrPrecondition) {
		t.Fatalf("If-None-Match * on an existing blob: %v", err)
	}
	if err := blobs.Put(ctx, "probe", []byte("a"), 2, o.Version); err != nil {
		t.Fatal(err)
	}
	if err := blobs.Put(ctx, "probe", []byte("a"), 3, o.Version); !errors.Is(err, fence.ErrPrecondition) {
		t.Fatalf("If-Match with the old ETag after a write of the same body: %v", err)
	}
	s := &azureStore{blobs: blobs, f: &fence.Object{Store: blobs, Attempts: 100}}
	fencesuite.Run(t, s, fencesuite.Config{MaxToken: fence.MaxToken, Rounds: 50, Writers: 4, Writes: 10})
}

package control

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"graphnode/kv"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	resp := &Response{Loader: &LoaderInfo{LoaderID: 3, Ring: "/dev/shm/x.ring", SubRings: 2, Fanouts: []int{15, 10}}}
	if err := WriteFrame(&buf, resp); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	if n := binary.LittleEndian.Uint32(raw); int(n) != len(raw)-4 {
		t.Fatalf("length prefix %d, body %d bytes", n, len(raw)-4)
	}
	got, err := ReadResponse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, resp) {
		t.Fatalf("got %+v, want %+v", got.Loader, resp.Loader)
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func TestReadFrameErrors(t *testing.T) {
	huge := binary.LittleEndian.AppendUint32(nil, MaxFrame+1)
	if _, err := ReadFrame(bytes.NewReader(huge)); !errors.Is(err, ErrProtocol) {
		t.Errorf("oversized frame: %v, want ErrProtocol", err)
	}
	short := append(binary.LittleEndian.AppendUint32(nil, 10), "abc"...)
	if _, err := ReadFrame(bytes.NewReader(short)); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated body: %v, want io.ErrUnexpectedEOF", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{1, 0})); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated length: %v, want io.ErrUnexpectedEOF", err)
	}
}

// TestReadFrameAllocatesAsBytesArrive: a length prefix alone must not
// make ReadFrame allocate the body it announces (a peer's 4 bytes pinned
// 64 MiB); a large body that does arrive is read whole.
func TestReadFrameAllocatesAsBytesArrive(t *testing.T) {
	prefix := binary.LittleEndian.AppendUint32(nil, MaxFrame)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(bytes.NewReader(prefix))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("prefix only: %v, want io.ErrUnexpectedEOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 2*frameChunk {
		t.Errorf("prefix only: allocated %d bytes, want at most %d", got, 2*frameChunk)
	}
	for _, n := range []int{0, 1, frameChunk - 1, frameChunk, 3*frameChunk + 5} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i * 7)
		}
		got, err := ReadFrame(io.MultiReader(bytes.NewReader(binary.LittleEndian.AppendUint32(nil, uint32(n))), bytes.NewReader(body)))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%d-byte body: %d bytes back, %v", n, len(got), err)
		}
		short := io.MultiReader(bytes.NewReader(binary.LittleEndian.AppendUint32(nil, uint32(n+1))), bytes.NewReader(body))
		if _, err := ReadFrame(short); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d of %d bytes: %v, want io.ErrUnexpectedEOF", n, n+1, err)
		}
	}
}

func TestReadResponseError(t *testing.T) {
	var buf bytes.Buffer
	WriteFrame(&buf, &Response{Error: "each must be -1 (all) or positive", Key: "fanouts"})
	_, err := ReadResponse(&buf)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "fanouts" || err.Error() != "control: fanouts: each must be -1 (all) or positive" {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeRequestDefaults(t *testing.T) {
	req, err := DecodeRequest([]byte(`{"op":"open_loader","split":"train","fanouts":[15,10,5]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultLoaderOptions()
	want.Split, want.Fanouts = "train", []int{15, 10, 5}
	if !reflect.DeepEqual(req.LoaderOptions, want) {
		t.Fatalf("options %+v, want %+v", req.LoaderOptions, want)
	}
	if want.BatchSize != 512 || want.Epochs != 1 || want.WorldSize != 1 || !want.Features || !want.Labels {
		t.Fatalf("defaults changed: %+v (update docs/control.md too)", want)
	}
}

func TestDecodeRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		body, key, msg string
	}{
		{`{"op":"open_loader","split":"train","fanouts":[5],"fanout":[1]}`, "fanout", "unknown field"},
		{`{"op":"open_loader","split":"train","fanouts":"5"}`, "fanouts", "not a valid"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"batch_size":-1}`, "batch_size", "-1 is out of range"},
		{`{"op":"open_loader","split":"train","fanouts":[]}`, "fanouts", "missing"},
		{`{"op":"open_loader","split":"train","fanouts":[5,-2]}`, "fanouts", "fanouts[1] = -2"},
		// The mesh carries an int32: 2^32+5 would be 5 on a peer's hops.
		{`{"op":"open_loader","split":"train","fanouts":[5,4294967301]}`, "fanouts", "fanouts[1] = 4294967301 (hop 2) is over 2147483647"},
		{`{"op":"open_loader","split":"train","fanouts":[2147483648]}`, "fanouts", "fanouts[0] = 2147483648 (hop 1) is over 2147483647"},
		{`{"op":"open_loader","split":"dev","fanouts":[5]}`, "split", `"dev"`},
		{`{"op":"open_loader","fanouts":[5]}`, "split", "missing"},
		{`{"op":"open_loader","split":"train","seed_ids":[1],"fanouts":[5]}`, "seed_ids", "not both"},
		{`{"op":"open_loader","seed_ids":[],"fanouts":[5]}`, "seed_ids", "empty"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"rank":4,"world_size":4}`, "rank", "out of range 0..3"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"world_size":0}`, "world_size", "not positive"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"workers":65}`, "workers", "65"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"concurrency":-1}`, "concurrency", "-1"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"epochs":0}`, "epochs", "0 is out of range"},
		{`{"op":"open_loader","split":"train","fanouts":[5],"ring_size":"1G"}`, "ring_size", `"1G"`},
		{`{"op":"open_loader","split":"train","fanouts":[5],"loader_id":3}`, "loader_id", "not allowed"},
		{`{"op":"close_loader"}`, "loader_id", "missing"},
		{`{"op":"kv_drop"}`, "name", "missing"},
		{`{"op":"reboot"}`, "op", `"reboot"`},
		{`{}`, "op", "missing"},
		{`{"op":"stats"} {}`, "", "trailing"},
		{`{"op":"stats"}}`, "", "trailing"},
		{`{"op":"stats"}]]]garbage`, "", "trailing"},
		{`{"op":"close_loader","loader_id":3,"split":"train"}`, "split", "not allowed in close_loader"},
		{`{"op":"close_loader","loader_id":3,"fanouts":[2]}`, "fanouts", "not allowed in close_loader"},
		{`{"op":"stats","table":{"name":"t"}}`, "table", "not allowed in stats"},
		{`{"op":"stats","batch_size":64}`, "batch_size", "not allowed in stats"},
		{`{"op":"kv_save","name":"emb"}`, "name", "not allowed in kv_save"},
		{`{"op":"kv_save","replace_resized":true}`, "replace_resized", "not allowed in kv_save"},
		{`{"op":"kv_drop","name":"emb","loader_id":2}`, "loader_id", "not allowed in kv_drop"},
		{`{"op":"open_loader","split":"train","fanouts":[2],"name":"x"}`, "name", "not allowed in open_loader"},
		// Keys are case-sensitive and given once: encoding/json alone
		// would match "OP" or "Fanouts" and let a later key override or
		// merge into an earlier one.
		{`{"OP":"stats"}`, "OP", "unknown field"},
		{`{"op":"stats","Op":"open_loader"}`, "Op", "unknown field"},
		{`{"op":"open_loader","split":"train","Fanouts":[2]}`, "Fanouts", "unknown field"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync","LR":0.5}}`, "table.LR", "unknown field"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync","foo":1}}`, "table.foo", "unknown field"},
		{`{"op":"open_loader","seed_edges":{"src":[1],"dst":[2],"Dst":[3]},"fanouts":[2]}`, "seed_edges.Dst", "unknown field"},
		{`{"op":"stats","op":"open_loader"}`, "op", "given twice"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync"},"table":{"dim":3}}`, "table", "given twice"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"dim":3,"optimizer":"sgd","lr":0.1,"mode":"sync"}}`, "table.dim", "given twice"},
		{`{"op":"kv_create","table":{"name":"a","rows":1e3,"dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync"}}`, "table.rows", "neither a row count"},
		{`{"op":"kv_create","table":{"name":"a","rows":-1,"dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync"}}`, "table.rows", "neither a row count"},
		{`{"op":"kv_create","table":{"name":"a","rows":"edges","dim":2,"optimizer":"sgd","lr":0.1,"mode":"sync"}}`, "table.rows", "neither a row count"},
		// An explicit 0 reads as absent and would become the default.
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adam","lr":0.1,"mode":"sync","beta1":0}}`, "table.beta1", "beta1 0 is not supported"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adam","lr":0.1,"mode":"sync","beta2":0.0}}`, "table.beta2", "default is 0.999"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adagrad","lr":0.1,"mode":"async","eps":0}}`, "table.eps", "default is 1e-10"},
		// A step size of 0 trains nothing, a negative one climbs the loss:
		// the message says so, not "missing" alone or kv's ">= 0".
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"sgd","lr":0,"mode":"sync"}}`, "table.lr", `table "a": missing or 0 for optimizer sgd: want a step size > 0`},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adagrad","lr":-0.1,"mode":"async"}}`, "table.lr", `table "a": -0.1: want a step size > 0`},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adam","mode":"async"}}`, "table.lr", "missing or 0 for optimizer adam"},
		// Kept as float32 by the shards: 1e-60 would be 0, 1e60 infinite.
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"sgd","lr":1e-60,"mode":"sync"}}`, "table.lr", "outside float32's range"},
		{`{"op":"kv_create","table":{"name":"a","rows":10,"dim":2,"optimizer":"adam","lr":0.1,"eps":1e60,"mode":"sync"}}`, "table.eps", "outside float32's range"},
		{`not json`, "", "bad JSON"},
	} {
		_, err := DecodeRequest([]byte(tc.body))
		var ce *Error
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Msg, tc.msg) {
			t.Errorf("%s: err = %#v, want key %q and %q", tc.body, err, tc.key, tc.msg)
		}
	}
}

func TestDecodeRequestOK(t *testing.T) {
	for _, body := range []string{
		`{"op":"stats"}`,
		`{"op":"close_loader","loader_id":7}`,
		`{"op":"kv_drop","name":"emb"}`,
		`{"op":"kv_create","table":{"name":"p","rows":3,"dim":256,"optimizer":"average","mode":"sync"},"replace_resized":true}`,
		`{"op":"kv_create","table":{"name":"r","rows":"relations","dim":8,"optimizer":"adagrad","lr":0.1,"mode":"async"}}`,
		// What a client marshalling a whole Request sends: every field
		// without omitempty, at its zero value.
		`{"op":"stats","shuffle":false,"drop_last":false,"seed":0,"rank":0,"features":false,"labels":false}`,
		`{"op":"stats","batch_size":512,"epochs":1,"world_size":1,"features":true,"labels":true}`,
		`{"op":"open_loader","split":"train","fanouts":[2147483647,-1]}`,
		`{"op":"open_loader","seed_ids":[3,1,2],"fanouts":[-1,4],"batch_size":2,"shuffle":true,"drop_last":true,` +
			`"epochs":3,"seed":9,"rank":1,"world_size":2,"workers":4,"concurrency":8,"ring_size":"256MiB","features":false,"labels":false}`,
	} {
		if _, err := DecodeRequest([]byte(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// FuzzDecodeRequest: whatever the bytes, DecodeRequest either refuses them
// with a *Error or returns a valid request that encodes and decodes back
// to itself.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []*Request{
		{Op: OpStats, LoaderOptions: DefaultLoaderOptions()},
		{Op: OpCloseLoader, LoaderID: 12, LoaderOptions: DefaultLoaderOptions()},
		{Op: OpKVDrop, Name: "emb", LoaderOptions: DefaultLoaderOptions()},
		{Op: OpKVCreate, Table: &TableSpec{Name: "rel", Rows: Rows{Relations: true}, Dim: 8, Optimizer: "adagrad", LR: 0.1, Mode: "async"}, LoaderOptions: DefaultLoaderOptions()},
		{Op: OpOpenLoader, LoaderOptions: LoaderOptions{Split: "train", Fanouts: []int{15, 10, 5}, BatchSize: 1024,
			Shuffle: true, Epochs: 10, Seed: 1, Rank: 1, WorldSize: 4, Workers: 4, Concurrency: 8, RingSize: "1GB", Features: true, Labels: true}},
		{Op: OpOpenLoader, LoaderOptions: LoaderOptions{SeedIDs: []uint64{5, 6, 7}, Fanouts: []int{-1}, BatchSize: 2, Epochs: 1, WorldSize: 1}},
	}
	for _, r := range seeds {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"op":"open_loader","fanouts":[0]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || ce.Msg == "" {
				t.Fatalf("error %v is not a *Error with a message", err)
			}
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("decoded request does not validate: %v", err)
		}
		again, err := json.Marshal(&req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRequest(again)
		if err != nil {
			t.Fatalf("re-encoded %s: %v", again, err)
		}
		if !reflect.DeepEqual(back, req) {
			t.Fatalf("round trip:\n%+v\n%+v", back, req)
		}
	})
}

// TestResponseKVCode: an error response's kv_code unwraps to kv's
// sentinel, and one without it to nothing.
func TestResponseKVCode(t *testing.T) {
	_, err := DecodeResponse([]byte(`{"error":"kv: table \"t\": dim differs from the existing table's","key":"table","kv_code":10}`))
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "table" || ce.KVCode != 10 || !errors.Is(err, kv.ErrSpec) {
		t.Fatalf("kv_code 10: %#v, want a control.Error with key table matching kv.ErrSpec", err)
	}
	_, err = DecodeResponse([]byte(`{"error":"bad","key":"fanouts"}`))
	if !errors.As(err, &ce) || errors.Unwrap(err) != nil || errors.Is(err, kv.ErrSpec) {
		t.Fatalf("no kv_code: %#v unwraps to %v", err, errors.Unwrap(err))
	}
}

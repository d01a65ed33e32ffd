package http_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/suanli/suanli"
	shttp "github.com/suanli/suanli/http"
)

// fuzzDecode checks the server's decoding of one request type: it never
// panics, any failure is an EINVALID *suanli.Error (a 400 that says what is
// wrong), and whatever it accepts survives a round trip.
func fuzzDecode[T any](f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(``))
	f.Add([]byte(`{`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"env":{}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var v T
		err := shttp.DecodeBytes(body, &v)
		if err != nil {
			var se *suanli.Error
			if !errors.As(err, &se) || se.Code != suanli.EINVALID || se.Message == "" {
				t.Fatalf("decode(%q) = %#v, want an EINVALID *suanli.Error with a message", body, err)
			}
			return
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("decoded %q but cannot encode it again: %v", body, err)
		}
		var again T
		if err := shttp.DecodeBytes(b, &again); err != nil {
			t.Fatalf("decoded %q, encoded %s, which does not decode: %v", body, b, err)
		}
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("round trip of %q changed it: %s != %s", body, b, b2)
		}
	})
}

func FuzzDecodeInstanceCreate(f *testing.F) {
	fuzzDecode[suanli.InstanceCreate](f,
		`{"offer_id":1,"image":"ubuntu:24.04","cmd":["sh","-c","echo hi"],"env":{"A":"1"},"num_gpus":1}`,
		`{"offer_id":1,"image":"x","secret_env":{"TOKEN":"s3cret"},"registry_auth":{"username":"u","password":"p"},"allowed_countries":["DE","eu-west"]}`,
		`{"offer_id":1,"image":"x","bid":250000,"rental_type":"interruptible"}`,
		`{"offer_id":"one"}`, `{"gpus":2}`)
}

func FuzzDecodeKeyCreate(f *testing.F) {
	fuzzDecode[suanli.KeyCreate](f, `{"name":"ci","scopes":["instance:read"],"ttl_seconds":86400}`, `{"ttl_seconds":-1}`)
}

func FuzzDecodeTokenCreate(f *testing.F) {
	fuzzDecode[suanli.TokenCreate](f, `{"scopes":["instance:read"],"ttl_seconds":3600}`)
}

func FuzzDecodeInvitationCreate(f *testing.F) {
	fuzzDecode[suanli.InvitationCreate](f, `{"role":"member","account":"bob","ttl_seconds":3600}`)
}

func FuzzDecodeListingUpdate(f *testing.F) {
	fuzzDecode[suanli.ListingUpdate](f, `{"price_gpu":400000,"end_date":"2027-06-30T00:00:00Z","country":"DE"}`)
}

func FuzzDecodeSyncRequest(f *testing.F) {
	fuzzDecode[suanli.SyncRequest](f, `{"machine_id":1,"seq":3,"wait":true,"instances":[{"id":1,"status":"running"}],"logs":[{"instance_id":1,"offset":0,"data":"aGk="}]}`)
}

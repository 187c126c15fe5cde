package state

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// durableBucket opens (or creates) a key-value bucket beside the log, on
// disk.
func (l *JetStreamLog) durableBucket(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	return l.keyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage})
}

// keyValue opens (or creates) the key-value bucket cfg names, replicated
// as the log is and keeping each key's last value; a fleet still forming
// is waited for, within ctx.
func (l *JetStreamLog) keyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.History, cfg.Replicas = 1, l.replicas
	var kv jetstream.KeyValue
	err := untilReady(ctx, func(ctx context.Context) error {
		var err error
		kv, err = l.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state: the %s bucket: %w", cfg.Bucket, err)
	}
	return kv, nil
}

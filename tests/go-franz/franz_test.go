// franz-go (kgo, kadm) against a running Gregor: tests/e2e/test_go_franz.py starts a
// three-broker dev-cluster and runs `go test` here with its bootstrap servers in
// GREGOR_BOOTSTRAP.
package franz

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func seeds(t *testing.T) []string {
	b := os.Getenv("GREGOR_BOOTSTRAP")
	if b == "" {
		t.Fatal("GREGOR_BOOTSTRAP is not set: run these tests through tests/e2e/test_go_franz.py")
	}
	return strings.Split(b, ",")
}

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func newClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(seeds(t)...), kgo.RequestTimeoutOverhead(20 * time.Second)}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t *testing.T) *kadm.Client {
	return kadm.NewClient(newClient(t))
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(ctxT(t, 30*time.Second), partitions, rf, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v (%s)", topic, err, resp.Err, resp.ErrMessage)
	}
}

// produce sends count records "k<i>"/"v<i>" with a header and waits for every ack.
func produce(t *testing.T, cl *kgo.Client, topic string, count int) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for i := 0; i < count; i++ {
		wg.Add(1)
		r := &kgo.Record{
			Topic:   topic,
			Key:     []byte(fmt.Sprintf("k%d", i)),
			Value:   []byte(fmt.Sprintf("v%d", i)),
			Headers: []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}},
		}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d produces failed, first: %v", len(errs), count, errs[0])
	}
}

// consumeN polls until count records arrived.
func consumeN(t *testing.T, cl *kgo.Client, count int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	ctx := ctxT(t, 45*time.Second)
	for len(out) < count {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("timed out with %d of %d records", len(out), count)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("fetch %s-%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

func values(rs []*kgo.Record) []string {
	var vs []string
	for _, r := range rs {
		vs = append(vs, string(r.Value))
	}
	sort.Strings(vs)
	return vs
}

func expected(count int) []string {
	var vs []string
	for i := 0; i < count; i++ {
		vs = append(vs, fmt.Sprintf("v%d", i))
	}
	sort.Strings(vs)
	return vs
}

func sameStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %d %v, want %d %v", what, len(got), got, len(want), want)
	}
}

// An idempotent acks=all producer with each codec; a direct consumer reads every record back
// with its key, header and partition order.
func TestProduceEachCodec(t *testing.T) {
	adm := newAdmin(t)
	codecs := map[string]kgo.CompressionCodec{
		"none":   kgo.NoCompression(),
		"gzip":   kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(),
		"lz4":    kgo.Lz4Compression(),
		"zstd":   kgo.ZstdCompression(),
	}
	const count = 200
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := unique("franz-codec-" + name)
			createTopic(t, adm, topic, 3, 3, nil)
			p := newClient(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec),
				kgo.ProducerLinger(5*time.Millisecond))
			produce(t, p, topic, count)
			if pid, epoch, err := p.ProducerID(ctxT(t, 10*time.Second)); err != nil || pid < 0 || epoch < 0 {
				t.Fatalf("the producer is not idempotent: id %d epoch %d err %v", pid, epoch, err)
			}
			c := newClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			rs := consumeN(t, c, count)
			sameStrings(t, "values", values(rs), expected(count))
			last := map[int32]int64{}
			for _, r := range rs {
				if string(r.Key) != "k"+strings.TrimPrefix(string(r.Value), "v") {
					t.Fatalf("key %q for value %q", r.Key, r.Value)
				}
				if len(r.Headers) != 1 || r.Headers[0].Key != "n" || "v"+string(r.Headers[0].Value) != string(r.Value) {
					t.Fatalf("headers %v for value %q", r.Headers, r.Value)
				}
				if prev, ok := last[r.Partition]; ok && r.Offset != prev+1 {
					t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
				}
				last[r.Partition] = r.Offset
			}
			ends, err := adm.ListEndOffsets(ctxT(t, 10*time.Second), topic)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
			if total != count {
				t.Fatalf("end offsets add up to %d, want %d", total, count)
			}
		})
	}
}

// Two members of one group share the partitions and together read every record once;
// their commits are read back with kadm; then the group is described.
func groupRoundTrip(t *testing.T, protocol string, groupOpts ...kgo.Opt) {
	adm := newAdmin(t)
	topic := unique("franz-group-" + protocol)
	group := unique("franz-g-" + protocol)
	createTopic(t, adm, topic, 4, 2, nil)
	const count = 400
	produce(t, newClient(t, kgo.RequiredAcks(kgo.AllISRAcks())), topic, count)

	var mu sync.Mutex
	seen := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var members []*kgo.Client
	for i := 0; i < 2; i++ {
		opts := append([]kgo.Opt{
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
		}, groupOpts...)
		members = append(members, newClient(t, opts...))
	}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func(m *kgo.Client) {
			defer wg.Done()
			for ctx.Err() == nil {
				fs := m.PollFetches(ctx)
				fs.EachError(func(topic string, p int32, err error) {
					if ctx.Err() == nil {
						t.Errorf("fetch %s-%d: %v", topic, p, err)
					}
				})
				rs := fs.Records()
				if len(rs) > 0 {
					if err := m.CommitRecords(ctx, rs...); err != nil && ctx.Err() == nil {
						t.Errorf("commit: %v", err)
					}
				}
				mu.Lock()
				for _, r := range rs {
					seen[string(r.Value)]++
				}
				n := len(seen)
				mu.Unlock()
				if n == count {
					cancel()
				}
			}
		}(m)
	}
	wg.Wait()
	mu.Lock()
	got := make([]string, 0, len(seen))
	for v := range seen {
		got = append(got, v)
	}
	mu.Unlock()
	sort.Strings(got)
	sameStrings(t, "values read by the group", got, expected(count))

	// The committed offsets add up to every record.
	offs, err := adm.FetchOffsets(ctxT(t, 15*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch offset %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		committed += o.At
	})
	if committed != count {
		t.Fatalf("committed offsets add up to %d, want %d", committed, count)
	}

	// Both members are in the group and, once it settled (a KIP-848 group reconciles for a
	// moment after the second member joins), together own every partition.
	deadline := time.Now().Add(30 * time.Second)
	for {
		state, problem := describeGroup(t, adm, protocol, group)
		if problem == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("described group (state %q): %s", state, problem)
		}
		time.Sleep(200 * time.Millisecond)
	}
	listed, err := adm.ListGroups(ctxT(t, 15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := listed[group]; !ok {
		t.Fatalf("ListGroups lacks %s: %v", group, listed.Groups())
	}
	for _, m := range members {
		m.Close()
	}
}

func TestGroupClassic(t *testing.T) {
	groupRoundTrip(t, "classic")
}

// KIP-848: the broker assigns the partitions (ConsumerGroupHeartbeat).
func TestGroupKIP848(t *testing.T) {
	groupRoundTrip(t, "consumer", kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
}

func TestAdmin(t *testing.T) {
	adm := newAdmin(t)
	ctx := ctxT(t, 90*time.Second)
	topic := unique("franz-admin")
	retention := "3600000"
	created, err := adm.CreateTopics(ctx, 3, 2, map[string]*string{"retention.ms": &retention}, topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := created.On(topic, nil); c.Err != nil || c.NumPartitions != 3 || c.ReplicationFactor != 2 {
		t.Fatalf("created: %+v", c)
	}
	// Again: TOPIC_ALREADY_EXISTS.
	again, err := adm.CreateTopics(ctx, 1, 1, nil, topic)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := again.On(topic, nil); c.Err != kerr.TopicAlreadyExists {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", c.Err)
	}

	topics, err := adm.ListTopics(ctx, topic)
	if err != nil || !topics.Has(topic) || len(topics[topic].Partitions) != 3 {
		t.Fatalf("list topics: %v %v", err, topics)
	}
	for _, p := range topics[topic].Partitions {
		if len(p.Replicas) != 2 || len(p.ISR) != 2 || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %d: leader %d replicas %v isr %v", p.Partition, p.Leader, p.Replicas, p.ISR)
		}
	}

	// Describe configs: the topic's override and a default.
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	found := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		found[c.Key] = c
	}
	if c := found["retention.ms"]; c.MaybeValue() != retention || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms: %q from %v", c.MaybeValue(), c.Source)
	}
	if c := found["cleanup.policy"]; c.MaybeValue() != "delete" {
		t.Fatalf("cleanup.policy: %q", c.MaybeValue())
	}
	// Incremental alter, then read it back.
	seg := "1048576"
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &seg}}, topic)
	if err != nil || alt[0].Err != nil {
		t.Fatalf("alter configs: %v %v", err, alt)
	}
	configs, err = adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, _ = configs.On(topic, nil)
	for _, c := range rc.Configs {
		if c.Key == "segment.bytes" && c.MaybeValue() != seg {
			t.Fatalf("segment.bytes after alter: %q", c.MaybeValue())
		}
	}

	// Offsets: start 0, end = what was produced, by time.
	before := time.Now().UnixMilli()
	produce(t, newClient(t), topic, 30)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil || starts.Error() != nil {
		t.Fatalf("list start offsets: %v %v", err, starts.Error())
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v %v", err, ends.Error())
	}
	var total int64
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("start offset of %d: %d", o.Partition, o.Offset)
		}
	})
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 30 {
		t.Fatalf("end offsets add up to %d, want 30", total)
	}
	byTime, err := adm.ListOffsetsAfterMilli(ctx, before, topic)
	if err != nil || byTime.Error() != nil {
		t.Fatalf("offsets by time: %v %v", err, byTime.Error())
	}
	byTime.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 {
			t.Errorf("first offset after %d in partition %d: %d, want 0", before, o.Partition, o.Offset)
		}
	})

	// Delete records below offset 1 of partition 0 (when it has any), and add partitions.
	if e, ok := ends.Lookup(topic, 0); ok && e.Offset > 1 {
		os := kadm.Offsets{}
		os.AddOffset(topic, 0, 1, -1)
		dr, err := adm.DeleteRecords(ctx, os)
		if err != nil || dr.Error() != nil {
			t.Fatalf("delete records: %v %v", err, dr.Error())
		}
		starts, _ = adm.ListStartOffsets(ctx, topic)
		if s, _ := starts.Lookup(topic, 0); s.Offset != 1 {
			t.Fatalf("start offset after DeleteRecords: %d", s.Offset)
		}
	}
	cp, err := adm.CreatePartitions(ctx, 2, topic)
	if err != nil || cp.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, cp.Error())
	}

	// Brokers, coordinators, API versions.
	brokers, err := adm.ListBrokers(ctx)
	if err != nil || len(brokers) != 3 {
		t.Fatalf("brokers: %v %v", err, brokers)
	}
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	versions.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil {
			t.Errorf("ApiVersions of %d: %v", v.NodeID, v.Err)
		}
	})

	// Delete; then describing it says UNKNOWN_TOPIC_OR_PARTITION.
	deleted, err := adm.DeleteTopics(ctx, topic)
	if err != nil || deleted.Error() != nil {
		t.Fatalf("delete: %v %v", err, deleted.Error())
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil && md.Topics[topic].Err == kerr.UnknownTopicOrPartition {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic is still there after delete: %v %v", err, md.Topics[topic].Err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	missing, err := adm.DeleteTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := missing.On(topic, nil); d.Err != kerr.UnknownTopicOrPartition {
		t.Fatalf("second delete: %v", d.Err)
	}
}

// describeGroup says what is not yet as expected of a settled two-member group ("" when all is).
func describeGroup(t *testing.T, adm *kadm.Client, protocol, group string) (string, string) {
	if protocol == "classic" {
		described, err := adm.DescribeGroups(ctxT(t, 15*time.Second), group)
		if err != nil {
			t.Fatal(err)
		}
		g := described[group]
		if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 || g.Protocol == "" || g.ProtocolType != "consumer" {
			return g.State, fmt.Sprintf("err %v members %d protocol %q type %q", g.Err, len(g.Members), g.Protocol, g.ProtocolType)
		}
		return g.State, ""
	}
	described, err := adm.DescribeConsumerGroups(ctxT(t, 15*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	g := described[group]
	owned := 0
	for _, m := range g.Members {
		for _, ps := range m.Assignment {
			owned += len(ps)
		}
	}
	if g.Err != nil || g.State != "Stable" || len(g.Members) != 2 || owned != 4 {
		return g.State, fmt.Sprintf("err %v members %d owning %d partitions", g.Err, len(g.Members), owned)
	}
	return g.State, ""
}

// ACLs (the cluster runs the ACL authorizer), client quotas, SCRAM credentials, preferred
// leader elections, log dirs and partition reassignments through kadm.
func TestAdminSecurityAndPlacement(t *testing.T) {
	adm := newAdmin(t)
	ctx := ctxT(t, 90*time.Second)
	topic := unique("franz-admin2")
	createTopic(t, adm, topic, 2, 2, nil)
	produce(t, newClient(t), topic, 20)

	// ACLs: create, describe, delete.
	acl := kadm.NewACLs().Topics(topic).Allow("User:alice").AllowHosts("*").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral)
	created, err := adm.CreateACLs(ctx, acl)
	if err != nil || len(created) != 1 || created[0].Err != nil {
		t.Fatalf("create ACLs: %v %+v", err, created)
	}
	described, err := adm.DescribeACLs(ctx, acl)
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 1 {
		t.Fatalf("describe ACLs: %v %+v", err, described)
	}
	if d := described[0].Described[0]; d.Principal != "User:alice" || d.Name != topic || d.Operation != kadm.OpRead {
		t.Fatalf("described ACL: %+v", d)
	}
	deleted, err := adm.DeleteACLs(ctx, acl)
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete ACLs: %v %+v", err, deleted)
	}

	// Client quotas: set a user's producer_byte_rate, read it back, remove it.
	user := unique("franz-user")
	entity := kadm.ClientQuotaEntity{{Type: "user", Name: &user}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}}}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("alter client quotas: %v %+v", err, altered)
	}
	quotas, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &user}})
	if err != nil || len(quotas) != 1 || len(quotas[0].Values) != 1 ||
		quotas[0].Values[0].Key != "producer_byte_rate" || quotas[0].Values[0].Value != 1048576 {
		t.Fatalf("describe client quotas: %v %+v", err, quotas)
	}
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity,
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}}); err != nil {
		t.Fatal(err)
	}

	// SCRAM: upsert a credential, describe it, delete it.
	scram, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha256,
		Iterations: 4096, Password: "secret"}})
	if err != nil || scram[user].Err != nil {
		t.Fatalf("upsert SCRAM: %v %+v", err, scram)
	}
	users, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil || users[user].Err != nil || len(users[user].CredInfos) != 1 ||
		users[user].CredInfos[0].Mechanism != kadm.ScramSha256 || users[user].CredInfos[0].Iterations != 4096 {
		t.Fatalf("describe SCRAM: %v %+v", err, users)
	}
	if _, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha256}}, nil); err != nil {
		t.Fatal(err)
	}

	// A preferred election where the preferred leaders already lead: ELECTION_NOT_NEEDED.
	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := elected[topic][0]; r.Err != kerr.ElectionNotNeeded {
		t.Fatalf("preferred election: %v (%s)", r.Err, r.ErrMessage)
	}

	// Log dirs: every replica of the topic, with its size.
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil {
		t.Fatal(err)
	}
	replicas, bytes := 0, int64(0)
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Errorf("log dir %s of %d: %v", d.Dir, d.Broker, d.Err)
		}
		for _, ps := range d.Topics {
			replicas += len(ps)
		}
		bytes += d.Size()
	})
	if replicas != 4 || bytes == 0 {
		t.Fatalf("log dirs: %d replicas, %d bytes", replicas, bytes)
	}

	// No reassignment in progress.
	moving, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	if err != nil || len(moving) != 0 {
		t.Fatalf("list reassignments: %v %+v", err, moving)
	}
}

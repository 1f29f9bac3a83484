// Sarama (Go, Debian's golang-github-shopify-sarama-dev 1.22) against Gregor, pinned to the
// protocol versions of the Kafka release given with -version (sarama sends no ApiVersions;
// it picks each request's version from that release): admin (create topic, describe it,
// create partitions, describe its config, list and describe groups, committed offsets),
// acks=all produce, consume in a consumer group with commits, delete the topic. Prints one
// JSON line; exits 1 on the first error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

type handler struct {
	mu    sync.Mutex
	seen  map[string]bool
	want  int
	done  chan struct{}
	close sync.Once
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		h.mu.Lock()
		h.seen[string(m.Value)] = true
		if len(h.seen) >= h.want {
			h.close.Do(func() { close(h.done) })
		}
		h.mu.Unlock()
	}
	return nil
}

func main() {
	bootstrap := flag.String("bootstrap", "", "host:port")
	topic := flag.String("topic", "", "topic to create, fill, consume and delete")
	group := flag.String("group", "", "consumer group")
	count := flag.Int("count", 30, "messages")
	versionText := flag.String("version", "2.1.0", "Kafka release whose protocol versions to use")
	flag.Parse()
	version, err := sarama.ParseKafkaVersion(*versionText)
	if err != nil {
		fail("version", err)
	}
	config := sarama.NewConfig()
	config.Version = version
	config.ClientID = "e2e-sarama"
	config.Producer.Return.Successes = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.CommitInterval = 100 * time.Millisecond
	config.Consumer.Group.Session.Timeout = 10 * time.Second
	config.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	addrs := []string{*bootstrap}

	admin, err := sarama.NewClusterAdmin(addrs, config)
	if err != nil {
		fail("admin", err)
	}
	if err := admin.CreateTopic(*topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		fail("create topic", err)
	}
	if err := admin.CreatePartitions(*topic, 3, nil, false); err != nil {
		fail("create partitions", err)
	}
	var partitions int
	for i := 0; i < 100; i++ {
		described, err := admin.DescribeTopics([]string{*topic})
		if err == nil && len(described) == 1 && described[0].Err == sarama.ErrNoError && len(described[0].Partitions) == 3 {
			ok := true
			for _, p := range described[0].Partitions {
				ok = ok && p.Leader >= 0 && p.Err == sarama.ErrNoError
			}
			if ok {
				partitions = len(described[0].Partitions)
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	configs, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: *topic})
	if err != nil {
		fail("describe config", err)
	}

	producer, err := sarama.NewSyncProducer(addrs, config)
	if err != nil {
		fail("producer", err)
	}
	for i := 0; i < *count; i++ {
		msg := &sarama.ProducerMessage{Topic: *topic, Partition: int32(i % 3),
			Key: sarama.StringEncoder(fmt.Sprintf("k%d", i)), Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))}
		if _, _, err := producer.SendMessage(msg); err != nil {
			fail("produce", err)
		}
	}
	producer.Close()

	consumer, err := sarama.NewConsumerGroup(addrs, *group, config)
	if err != nil {
		fail("consumer group", err)
	}
	h := &handler{seen: map[string]bool{}, want: *count, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ctx.Err() == nil {
			if err := consumer.Consume(ctx, []string{*topic}, h); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "consume: %v\n", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		fail("consume", fmt.Errorf("saw %d of %d messages", len(h.seen), *count))
	}
	time.Sleep(500 * time.Millisecond) // one more commit interval
	cancel()
	if err := consumer.Close(); err != nil {
		fail("close consumer", err)
	}

	groups, err := admin.ListConsumerGroups()
	if err != nil {
		fail("list groups", err)
	}
	described, err := admin.DescribeConsumerGroups([]string{*group})
	if err != nil {
		fail("describe groups", err)
	}
	offsets, err := admin.ListConsumerGroupOffsets(*group, map[string][]int32{*topic: {0, 1, 2}})
	if err != nil {
		fail("committed offsets", err)
	}
	committed := map[string]int64{}
	for t, ps := range offsets.Blocks {
		for p, b := range ps {
			committed[fmt.Sprintf("%s-%d", t, p)] = b.Offset
		}
	}
	if err := admin.DeleteTopic(*topic); err != nil {
		fail("delete topic", err)
	}
	admin.Close()
	consumed := []string{}
	for v := range h.seen {
		consumed = append(consumed, v)
	}
	sort.Strings(consumed)
	groupNames := []string{}
	for g := range groups {
		groupNames = append(groupNames, g)
	}
	out, _ := json.Marshal(map[string]interface{}{
		"partitions": partitions, "configs": len(configs), "consumed": consumed,
		"groups": groupNames, "state": described[0].State, "committed": committed,
	})
	fmt.Println(string(out))
}

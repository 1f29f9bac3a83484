package gregor;

import static gregor.Cluster.assertFailsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Admin client on every admin API Gregor serves. */
@Timeout(90)
class AdminTest {

    static void produce(String topic, int partition, int n) throws Exception {
        try (KafkaProducer<String, String> p = Cluster.producer(Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, partition, "k" + i, "v" + i));
            }
            p.flush();
        }
    }

    @Test
    void describeCluster() throws Exception {
        try (Admin admin = Cluster.admin()) {
            DescribeClusterResult r = admin.describeCluster();
            Collection<Node> nodes = r.nodes().get();
            Set<Integer> ids = nodes.stream().map(Node::id).collect(Collectors.toSet());
            assertEquals(new HashSet<>(Cluster.brokerIds()), ids);
            for (Node n : nodes) {
                assertEquals("127.0.0.1", n.host());
                assertTrue(n.port() > 0);
            }
            assertTrue(ids.contains(r.controller().get().id()), "the controller is one of the brokers");
            String clusterId = r.clusterId().get();
            assertNotNull(clusterId);
            assertFalse(clusterId.isEmpty());
        }
    }

    @Test
    void createListDescribeDeleteTopics() throws Exception {
        String topic = Cluster.unique("java-admin-topic");
        int brokers = Cluster.brokerIds().size();
        try (Admin admin = Cluster.admin()) {
            CreateTopicsResult created = admin.createTopics(List.of(
                    new NewTopic(topic, 3, (short) Math.min(2, brokers)).configs(Map.of("retention.ms", "123456"))));
            created.all().get();
            assertEquals(3, created.numPartitions(topic).get());
            assertEquals(Math.min(2, brokers), created.replicationFactor(topic).get());
            assertNotNull(created.topicId(topic).get());
            Config c = created.config(topic).get();
            assertEquals("123456", c.get("retention.ms").value());

            assertTrue(admin.listTopics().names().get().contains(topic));

            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            assertEquals(topic, d.name());
            assertEquals(created.topicId(topic).get(), d.topicId());
            assertFalse(d.isInternal());
            assertEquals(3, d.partitions().size());
            for (TopicPartitionInfo p : d.partitions()) {
                assertEquals(Math.min(2, brokers), p.replicas().size());
                assertEquals(p.replicas().size(), p.isr().size());
                assertEquals(p.replicas().get(0), p.leader(), "the preferred replica leads");
            }

            // Refusals, with Kafka's error classes.
            assertFailsWith(TopicExistsException.class,
                    admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            assertFailsWith(InvalidReplicationFactorException.class,
                    admin.createTopics(List.of(new NewTopic(Cluster.unique("java-rf"), 1, (short) (brokers + 1)))).all());
            assertFailsWith(InvalidTopicException.class,
                    admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all());
            assertFailsWith(InvalidConfigurationException.class,
                    admin.createTopics(List.of(new NewTopic(Cluster.unique("java-cfg"), 1, (short) 1)
                            .configs(Map.of("cleanup.policy", "sometimes")))).all());
            // validateOnly creates nothing.
            String dry = Cluster.unique("java-dry");
            admin.createTopics(List.of(new NewTopic(dry, 1, (short) 1)), new CreateTopicsOptions().validateOnly(true))
                    .all().get();
            assertFalse(admin.listTopics().names().get().contains(dry));

            admin.deleteTopics(List.of(topic)).all().get();
            Cluster.waitUntil("the topic gone from listTopics", Duration.ofSeconds(20), () -> {
                try {
                    return !admin.listTopics().names().get().contains(topic);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            assertFailsWith(UnknownTopicOrPartitionException.class, admin.deleteTopics(List.of(topic)).all());
            assertFailsWith(UnknownTopicOrPartitionException.class,
                    admin.describeTopics(List.of(topic)).allTopicNames());
        }
    }

    @Test
    void createPartitions() throws Exception {
        String topic = Cluster.unique("java-partitions");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 1, (short) 1);
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            assertEquals(3, admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
            assertFailsWith(InvalidPartitionsException.class,
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all());
            assertFailsWith(UnknownTopicOrPartitionException.class,
                    admin.createPartitions(Map.of(Cluster.unique("java-missing"), NewPartitions.increaseTo(2))).all());
            // Explicit placement of the new partition.
            int broker = Cluster.brokerIds().get(Cluster.brokerIds().size() - 1);
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4, List.of(List.of(broker))))).all().get();
            TopicPartitionInfo p3 = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic)
                    .partitions().get(3);
            assertEquals(List.of(broker), p3.replicas().stream().map(Node::id).collect(Collectors.toList()));
            assertFailsWith(InvalidReplicaAssignmentException.class,
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5, List.of(List.of(999))))).all());
            // The new partitions take records.
            produce(topic, 3, 2);
            TopicPartition tp = new TopicPartition(topic, 3);
            assertEquals(2, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset());
        }
    }

    @Test
    void describeAndIncrementallyAlterConfigs() throws Exception {
        String topic = Cluster.unique("java-configs");
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 1, (short) 1);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
            ConfigEntry retention = c.get("retention.ms");
            assertEquals("604800000", retention.value());
            assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, retention.source());
            assertEquals("delete", c.get("cleanup.policy").value());

            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND))))
                    .all().get();
            c = admin.describeConfigs(List.of(res)).all().get().get(res);
            assertEquals("3600000", c.get("retention.ms").value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, c.get("retention.ms").source());
            assertEquals("delete,compact", c.get("cleanup.policy").value());

            admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT))))
                    .all().get();
            c = admin.describeConfigs(List.of(res)).all().get().get(res);
            assertEquals("604800000", c.get("retention.ms").value());
            assertEquals(ConfigEntry.ConfigSource.DEFAULT_CONFIG, c.get("retention.ms").source());
            assertEquals("compact", c.get("cleanup.policy").value());

            assertFailsWith(InvalidConfigurationException.class, admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all());
            assertFailsWith(InvalidConfigurationException.class, admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all());
            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, Cluster.unique("java-missing"));
            assertFailsWith(UnknownTopicOrPartitionException.class,
                    admin.describeConfigs(List.of(missing)).values().get(missing));

            // A broker's configuration.
            String id = Integer.toString(Cluster.brokerIds().get(0));
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, id);
            Config bc = admin.describeConfigs(List.of(broker)).all().get().get(broker);
            assertEquals(id, bc.get("broker.id").value());
            assertNotNull(bc.get("num.partitions"));
        }
    }

    @Test
    void acls() throws Exception {
        String topic = Cluster.unique("java-acl");
        try (Admin admin = Cluster.admin()) {
            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding write = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.PREFIXED),
                    new AccessControlEntry("User:bob", "127.0.0.1", AclOperation.WRITE, AclPermissionType.DENY));
            admin.createAcls(List.of(read, write)).all().get();

            AclBindingFilter forTopic = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.ANY), AccessControlEntryFilter.ANY);
            Cluster.waitUntil("both ACLs listed", Duration.ofSeconds(10), () -> {
                try {
                    return new HashSet<>(admin.describeAcls(forTopic).values().get()).equals(Set.of(read, write));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            // MATCH finds the prefixed ACL for a longer name.
            AclBindingFilter match = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic + "-x", PatternType.MATCH),
                    AccessControlEntryFilter.ANY);
            assertEquals(List.of(write), new ArrayList<>(admin.describeAcls(match).values().get()));

            AclBindingFilter aliceOnly = new AclBindingFilter(
                    new ResourcePatternFilter(ResourceType.TOPIC, topic, PatternType.ANY),
                    new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
            Collection<AclBinding> deleted = admin.deleteAcls(List.of(aliceOnly)).all().get();
            assertEquals(List.of(read), new ArrayList<>(deleted));
            Cluster.waitUntil("one ACL left", Duration.ofSeconds(10), () -> {
                try {
                    return new ArrayList<>(admin.describeAcls(forTopic).values().get()).equals(List.of(write));
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            admin.deleteAcls(List.of(forTopic)).all().get();
            Cluster.waitUntil("no ACL left", Duration.ofSeconds(10), () -> {
                try {
                    return admin.describeAcls(forTopic).values().get().isEmpty();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
        }
    }

    @Test
    void clientQuotas() throws Exception {
        String user = Cluster.unique("quota-user");
        ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, user));
        ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(
                List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user)));
        try (Admin admin = Cluster.admin()) {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0))))).all().get();
            assertEquals(Map.of(entity, Map.of("producer_byte_rate", 1048576.0, "consumer_byte_rate", 2097152.0)),
                    admin.describeClientQuotas(filter).entities().get());

            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all().get();
            assertEquals(Map.of(entity, Map.of("producer_byte_rate", 1048576.0)),
                    admin.describeClientQuotas(filter).entities().get());

            // Not enforced by Gregor, so refused (see docs/protocol-versions.md).
            assertFailsWith(InvalidRequestException.class, admin.alterClientQuotas(List.of(new ClientQuotaAlteration(
                    entity, List.of(new ClientQuotaAlteration.Op("controller_mutation_rate", 10.0))))).all());

            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            assertEquals(Map.of(), admin.describeClientQuotas(filter).entities().get());
        }
    }

    @Test
    void scramCredentials() throws Exception {
        String user = Cluster.unique("scram-user");
        try (Admin admin = Cluster.admin()) {
            List<UserScramCredentialAlteration> upserts = List.of(
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                            "secret-256"),
                    new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                            "secret-512"));
            admin.alterUserScramCredentials(upserts).all().get();
            UserScramCredentialsDescription d = admin.describeUserScramCredentials(List.of(user)).description(user).get();
            assertEquals(user, d.name());
            assertEquals(Set.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)), new HashSet<>(d.credentialInfos()));
            assertTrue(admin.describeUserScramCredentials().users().get().contains(user));

            // Kafka's checks: too few iterations.
            assertFailsWith(org.apache.kafka.common.errors.UnacceptableCredentialException.class,
                    admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(user,
                            new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), "x"))).all());

            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)))
                    .all().get();
            d = admin.describeUserScramCredentials(List.of(user)).description(user).get();
            assertEquals(List.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)), d.credentialInfos());
            // Deleting one that is not there.
            assertFailsWith(ResourceNotFoundException.class, admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all());
            admin.alterUserScramCredentials(List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)))
                    .all().get();
            assertFailsWith(ResourceNotFoundException.class,
                    admin.describeUserScramCredentials(List.of(user)).description(user));
        }
    }

    static List<Integer> replicas(Admin admin, String topic, int partition) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(partition)
                .replicas().stream().map(Node::id).collect(Collectors.toList());
    }

    static int leader(Admin admin, String topic, int partition) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(partition)
                .leader().id();
    }

    /**
     * Reassign a partition from one broker to two others in an order whose first replica is
     * not the current leader; the leader moves; a preferred election is then not needed.
     */
    @Test
    void reassignmentsAndLeaderElections() throws Exception {
        List<Integer> ids = Cluster.brokerIds();
        org.junit.jupiter.api.Assumptions.assumeTrue(ids.size() >= 3, "needs three brokers");
        String topic = Cluster.unique("java-reassign");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, new NewTopic(topic, Map.of(0, List.of(ids.get(0), ids.get(1)))));
            produce(topic, 0, 20);
            assertEquals(ids.get(0), leader(admin, topic, 0));

            // Not moving: cancelling is refused.
            assertFailsWith(NoReassignmentInProgressException.class,
                    admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all());
            assertFailsWith(InvalidReplicaAssignmentException.class, admin.alterPartitionReassignments(
                    Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(ids.get(0), 999))))).all());

            // [b1, b0] then [b2, b1]: keep b1, drop b0, add b2.
            List<Integer> target = List.of(ids.get(2), ids.get(1));
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(target)))).all().get();
            Cluster.waitUntil("the reassignment done", Duration.ofSeconds(30), () -> {
                try {
                    Map<TopicPartition, PartitionReassignment> ongoing =
                            admin.listPartitionReassignments(Set.of(tp)).reassignments().get();
                    return ongoing.isEmpty() && replicas(admin, topic, 0).equals(target);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            assertEquals(Map.of(), admin.listPartitionReassignments().reassignments().get());
            // The data moved with it: the new replica's log has the records.
            Cluster.waitUntil("the new replica in sync", Duration.ofSeconds(30), () -> {
                try {
                    return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().get(0)
                            .isr().size() == 2;
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });

            // Make a non-preferred leader: reassign to [b1, b2] (same set, b1 first). The
            // leader stays where it is as long as it is in the new replicas.
            int before = leader(admin, topic, 0);
            List<Integer> reordered = before == ids.get(2) ? List.of(ids.get(1), ids.get(2))
                    : List.of(ids.get(2), ids.get(1));
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(reordered))))
                    .all().get();
            Cluster.waitUntil("the reorder done", Duration.ofSeconds(30), () -> {
                try {
                    return replicas(admin, topic, 0).equals(reordered);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            assertEquals(before, leader(admin, topic, 0));
            assertTrue(before != reordered.get(0));

            Map<TopicPartition, Optional<Throwable>> elected =
                    admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
            assertEquals(Optional.empty(), elected.get(tp));
            Cluster.waitUntil("the preferred replica leading", Duration.ofSeconds(20), () -> {
                try {
                    return leader(admin, topic, 0) == reordered.get(0);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            // Again: not needed.
            elected = admin.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
            assertTrue(elected.get(tp).isPresent());
            assertEquals(ElectionNotNeededException.class, elected.get(tp).get().getClass());
            // Unknown partition.
            TopicPartition missing = new TopicPartition(topic, 7);
            elected = admin.electLeaders(ElectionType.PREFERRED, Set.of(missing)).partitions().get();
            assertEquals(UnknownTopicOrPartitionException.class, elected.get(missing).get().getClass());

            // The records are still all there, read from the new leader.
            assertEquals(20, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset());
        }
    }

    @Test
    void describeLogDirs() throws Exception {
        String topic = Cluster.unique("java-logdirs");
        int broker = Cluster.brokerIds().get(0);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, new NewTopic(topic, Map.of(0, List.of(broker))));
            produce(topic, 0, 10);
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get()
                    .get(broker);
            assertFalse(dirs.isEmpty());
            ReplicaInfo info = null;
            for (LogDirDescription d : dirs.values()) {
                assertEquals(null, d.error());
                assertTrue(d.totalBytes().isPresent() && d.totalBytes().getAsLong() > 0);
                assertTrue(d.usableBytes().isPresent());
                if (d.replicaInfos().containsKey(new TopicPartition(topic, 0))) {
                    info = d.replicaInfos().get(new TopicPartition(topic, 0));
                }
            }
            assertNotNull(info, "the partition is in one of the broker's log dirs");
            assertTrue(info.size() > 0, "its size counts the records: " + info.size());
            assertFalse(info.isFuture());
        }
    }

    @Test
    void deleteRecordsAndListOffsets() throws Exception {
        String topic = Cluster.unique("java-delete-records");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 1, (short) 1);
            long base = System.currentTimeMillis() - 60_000;
            try (KafkaProducer<String, String> p = Cluster.producer(Map.of(ProducerConfig.ACKS_CONFIG, "all"))) {
                for (int i = 0; i < 10; i++) {
                    // Distinct timestamps, the largest on the last record.
                    p.send(new ProducerRecord<>(topic, 0, base + i, "k" + i, "v" + i));
                }
                p.flush();
            }
            assertEquals(4, admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp)
                    .get().lowWatermark());
            ListOffsetsResult earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest()));
            assertEquals(4, earliest.partitionResult(tp).get().offset());
            assertEquals(10, admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get().offset());
            ListOffsetsResult.ListOffsetsResultInfo max =
                    admin.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
            assertEquals(9, max.offset());
            assertEquals(base + 9, max.timestamp());
            ListOffsetsResult.ListOffsetsResultInfo at =
                    admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 6))).partitionResult(tp).get();
            assertEquals(6, at.offset());
            // Beyond the high watermark.
            assertFailsWith(org.apache.kafka.common.errors.OffsetOutOfRangeException.class,
                    admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(11))).lowWatermarks().get(tp));
            // -1: up to the high watermark.
            assertEquals(10, admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(tp)
                    .get().lowWatermark());
            try (KafkaConsumer<String, String> c = Cluster.consumer(Map.of())) {
                assertEquals(Map.of(tp, 10L), c.beginningOffsets(List.of(tp)));
            }
        }
    }

    @Test
    void describeProducers() throws Exception {
        String topic = Cluster.unique("java-producers");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 1, (short) 1);
            try (KafkaProducer<String, String> p = Cluster.producer(Map.of(
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true, ProducerConfig.ACKS_CONFIG, "all"))) {
                for (int i = 0; i < 3; i++) {
                    p.send(new ProducerRecord<>(topic, 0, "k", "v")).get();
                }
            }
            DescribeProducersResult.PartitionProducerState state = admin.describeProducers(List.of(tp))
                    .partitionResult(tp).get();
            assertEquals(1, state.activeProducers().size());
            assertEquals(2, state.activeProducers().get(0).lastSequence());
        }
    }

    @Test
    void consumerGroupAdministration() throws Exception {
        String topic = Cluster.unique("java-group-admin");
        String group = Cluster.unique("g-admin");
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        try (Admin admin = Cluster.admin()) {
            Cluster.createTopic(admin, topic, 2, (short) 1);
            produce(topic, 0, 5);
            produce(topic, 1, 5);

            Map<String, Object> cfg = new HashMap<>();
            cfg.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            try (KafkaConsumer<String, String> c = Cluster.consumer(cfg)) {
                c.subscribe(List.of(topic));
                Cluster.pollN(c, 10);
                c.commitSync();

                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group)
                        .get();
                assertEquals(GroupState.STABLE, d.groupState());
                assertEquals(1, d.members().size());
                assertEquals(Set.of(p0, p1), d.members().iterator().next().assignment().topicPartitions());
                assertTrue(Cluster.brokerIds().contains(d.coordinator().id()));
                // A group with a member cannot be deleted.
                assertFailsWith(GroupNotEmptyException.class, admin.deleteConsumerGroups(List.of(group)).all());
            }

            @SuppressWarnings("deprecation")
            Collection<ConsumerGroupListing> listed = admin.listConsumerGroups().all().get();
            ConsumerGroupListing mine = listed.stream().filter(l -> l.groupId().equals(group)).findFirst()
                    .orElseThrow(() -> new AssertionError("group not listed: " + listed));
            assertEquals(Optional.of(GroupState.EMPTY), mine.groupState());

            assertEquals(Map.of(p0, new OffsetAndMetadata(5, Optional.empty(), ""),
                            p1, new OffsetAndMetadata(5, Optional.empty(), "")),
                    withoutEpochs(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()));

            admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(2, "rewound"))).all().get();
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            assertEquals(2, offsets.get(p0).offset());
            assertEquals("rewound", offsets.get(p0).metadata());
            assertEquals(5, offsets.get(p1).offset());

            // A consumer of the group starts where the offsets were set.
            try (KafkaConsumer<String, String> c = Cluster.consumer(cfg)) {
                c.assign(List.of(p0));
                assertEquals(2, c.position(p0));
            }

            admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            assertEquals(Set.of(p0), admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .keySet());

            admin.deleteConsumerGroups(List.of(group)).all().get();
            assertFailsWith(GroupIdNotFoundException.class, admin.deleteConsumerGroups(List.of(group)).all());
            ConsumerGroupDescription gone = null;
            Throwable t = Cluster.failure(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            if (t == null) {
                gone = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                assertEquals(GroupState.DEAD, gone.groupState());
            } else {
                assertEquals(GroupIdNotFoundException.class, t.getClass());
            }
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> withoutEpochs(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        m.forEach((tp, o) -> out.put(tp, new OffsetAndMetadata(o.offset(), Optional.empty(), o.metadata())));
        return out;
    }
}

"""The Java Kafka clients (`kafka-clients` 4.x from Maven Central) against Gregor (issue 27).

Kafka 4 clients refuse brokers below the Kafka 2.1 protocol baseline (KIP-896), so this is
also the check that Gregor's versions meet it. The tests themselves are JUnit 5 classes under
tests/java (ProducerTest: idempotent acks=all producers with every codec, read back with keys,
values, headers and timestamps; ConsumerTest: groups with the classic protocol and KIP-848,
seek, offsetsForTimes; AdminTest: every admin API Gregor serves). They run in one JVM, one
Maven Surefire run, against a three-broker dev-cluster started here with the ACL authorizer
(User:ANONYMOUS, every PLAINTEXT client, a super user) so the ACL APIs answer.

Maven runs offline (-o): scripts/test.sh resolves the pinned artifacts into ~/.m2 once per
machine (a Maven run over no test, which fetches Surefire's provider too). Surefire's XML
reports land in tests/java/target/surefire-reports; a failing run's summary is shown here.
"""

import os
import shutil
import subprocess

import pytest

JAVA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "java")
BROKERS = [1, 2, 3]


@pytest.fixture
def java_cluster(make_cluster):
    return make_cluster(len(BROKERS), broker_ids=BROKERS, overrides=[
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:ANONYMOUS",
        "file.delete.delay.ms=1000",
    ])


def run_maven(cluster, *extra, timeout=300):
    mvn = shutil.which("mvn")
    assert mvn, "Maven is not installed (scripts/test.sh installs it)"
    env = {
        **os.environ,
        "GREGOR_BOOTSTRAP": cluster.bootstrap,
        "GREGOR_BROKERS": ",".join(map(str, BROKERS)),
    }
    return subprocess.run(
        [mvn, "-B", "-o", "-q", "-f", os.path.join(JAVA_DIR, "pom.xml"), "test", *extra],
        env=env, capture_output=True, text=True, timeout=timeout,
    )


def test_java_clients(java_cluster):
    done = run_maven(java_cluster)
    out = done.stdout + done.stderr
    if "offline" in out and "resolve" in out.lower() and done.returncode != 0:
        pytest.fail("Maven's artifacts are not in ~/.m2: run the install step of scripts/test.sh "
                    "(the `mvn ... -f tests/java/pom.xml` line)\n" + out[-3000:])
    assert done.returncode == 0, f"the Java client tests failed:\n{out[-12000:]}"

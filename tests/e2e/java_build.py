"""The compiled tests/java project for the e2e tests that start their own JVMs (Kafka Streams,
Kafka Connect, Kafka's broker and perf tools): `classpath()` returns the classpath of the
compiled test classes and every pinned jar. Every Maven build of tests/java writes the resolved
classpath to tests/java/target/classpath.txt, so after test_java_clients.py's run (which sorts
first) nothing is built again; otherwise, or when a source is newer than the build, it runs
`mvn -o test-compile` once. scripts/test.sh resolves the artifacts into ~/.m2 once per machine.
"""

import os
import shutil
import subprocess

JAVA_DIR = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "java"))
_built = None


def _newest(root, suffix=""):
    newest = 0.0
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(suffix):
                newest = max(newest, os.path.getmtime(os.path.join(d, f)))
    return newest


def up_to_date():
    """Whether the last Maven build is newer than the pom and every source."""
    target = os.path.join(JAVA_DIR, "target")
    cp = os.path.join(target, "classpath.txt")
    if not os.path.exists(cp):
        return False
    pom = os.path.getmtime(os.path.join(JAVA_DIR, "pom.xml"))
    # Maven leaves classpath.txt alone when the classpath did not change: it need only be
    # newer than the pom, the classes newer than every source.
    classes = _newest(os.path.join(target, "test-classes"), ".class")
    return os.path.getmtime(cp) >= pom and classes >= max(_newest(os.path.join(JAVA_DIR, "src")), pom)


def classpath():
    global _built
    if _built is None and not up_to_date():
        mvn = shutil.which("mvn")
        assert mvn, "Maven is not installed (scripts/test.sh installs it)"
        done = subprocess.run(
            [mvn, "-B", "-o", "-q", "-f", os.path.join(JAVA_DIR, "pom.xml"), "test-compile"],
            capture_output=True, text=True, timeout=600,
        )
        out = done.stdout + done.stderr
        assert done.returncode == 0, (
            "mvn -o test-compile of tests/java failed (are the artifacts in ~/.m2? scripts/test.sh "
            "resolves them):\n" + out[-6000:]
        )
    if _built is None:
        with open(os.path.join(JAVA_DIR, "target", "classpath.txt")) as f:
            jars = f.read().strip()
        _built = os.path.join(JAVA_DIR, "target", "test-classes") + os.pathsep + jars
    return _built


# A quick start over peak speed: these JVMs run tests, not benchmarks.
QUICK_START = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def java(main_class, *args, jvm_opts=QUICK_START, **popen):
    """Starts `java <jvm_opts> -cp <classpath> main_class args...` and returns the Popen."""
    cmd = [shutil.which("java") or "java", *jvm_opts, "-cp", classpath(), main_class, *map(str, args)]
    return subprocess.Popen(cmd, **popen)

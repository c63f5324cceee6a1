"""The viewer's command line in real processes: the port is taken before an address is printed, ``--port 0``
prints the real one, and listening beyond loopback is warned about."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request

import pytest

from runners.eval_viewer.__main__ import is_loopback
from tests.reliability.viewer_server import HTTP_WAIT_S, START_WAIT_S, viewer_process
from tests.runs import REPO_ROOT

pytestmark = pytest.mark.timeout(600)


@pytest.mark.slow
def test_port_zero_prints_the_real_address_and_a_network_host_is_warned_about(tmp_path):
    with viewer_process(["--log-dirs", str(tmp_path), "--host", "0.0.0.0"], cwd=REPO_ROOT) as (url, output):
        port = int(re.search(r":(\d+)$", url).group(1))
        assert port != 0
        assert "warning: --host 0.0.0.0 listens beyond this machine" in output and "no login" in output
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=HTTP_WAIT_S) as response:
            assert response.status == 200 and "Lantern eval viewer" in response.read().decode()
        taken = subprocess.run([sys.executable, "-m", "runners.eval_viewer", "--log-dirs", str(tmp_path),
                                "--port", str(port)], cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=START_WAIT_S)
    assert taken.returncode == 2
    assert "open http" not in taken.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr and "--port 0" in taken.stderr


def test_only_loopback_hosts_go_without_the_warning():
    assert all(is_loopback(host) for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "192.168.1.7", "example.invalid"))

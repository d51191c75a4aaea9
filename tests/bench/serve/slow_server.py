"""A stand-in inference server for the Ctrl-C test, started by ``truepeak serve --launch``: the tests' FakeOpenAI
on 127.0.0.1:PORT, each streamed chunk 0.2 s apart, writing its pid to PIDFILE.

    python3 slow_server.py PORT PIDFILE
"""

import os
import sys
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conftest import FakeOpenAI  # noqa: E402


class Slow(FakeOpenAI):
    def do_POST(self):
        write = self.wfile.write

        def slow(data):
            time.sleep(0.2)
            write(data)

        self.wfile.write = slow
        super().do_POST()


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(str(os.getpid()))
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Slow).serve_forever()

import json
import sys

try:
    from orchestrator.cli import main
except KeyboardInterrupt:  # Ctrl-C while the program loads: nothing was started, say so in one line
    message = "stopped by Ctrl-C while starting: nothing was created"
    line = message if sys.stderr.isatty() else json.dumps({"event": "run.interrupted", "message": message})
    sys.stderr.write(line + "\n")
    sys.exit(130)

if __name__ == "__main__":
    main()

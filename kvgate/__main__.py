"""`python -m kvgate`: the `kvgate` command line, for an environment whose scripts are not on PATH."""

from kvgate.cli import main

if __name__ == "__main__":
    main()

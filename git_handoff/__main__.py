from git_handoff import cmdclient

cmdclient.run_if_started_as_program()  # a command server of this repository may take the run

from git_handoff.cli import main  # noqa: E402

if __name__ == "__main__":
    main()

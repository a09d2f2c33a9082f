from autograder.commands.cli import main

raise SystemExit(main())

from npu_migrate.cli import main

main()

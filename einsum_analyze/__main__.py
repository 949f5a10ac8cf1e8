from einsum_analyze.cli import main

main()

"""``python -m smithers_tt.cli``: the same as the ``smithers-tt`` script."""

from smithers_tt.cli import main

if __name__ == "__main__":
    main()

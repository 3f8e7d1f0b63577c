"""The kernel scenario's verifier reads what converge kept (results.json, the gates' JSON) and asks the guest."""

"""Writes chat-v1.jsonl: 288 varied single-turn chat prompts in AIPerf's single_turn JSONL format
({"text": ...} per line), written for qualflow (no external dataset; CC0, like the rest of the
repo's data). Deterministic: rerun it and the file (and its sha256, the dataset identity) is
unchanged.

    python workloads/prompts/make_chat_v1.py > workloads/prompts/chat-v1.jsonl
"""

import json
import random

SUBJECTS = [
    "a hash map",
    "binary search",
    "the TCP handshake",
    "photosynthesis",
    "compound interest",
    "a B-tree",
    "garbage collection",
    "the French Revolution",
    "plate tectonics",
    "a sourdough starter",
    "vaccines",
    "public-key cryptography",
    "the water cycle",
    "supply and demand",
    "a Kalman filter",
    "black holes",
    "the immune system",
    "git rebase",
    "a load balancer",
    "Roman aqueducts",
    "the Krebs cycle",
    "a mechanical watch",
    "inflation",
    "KV caches in transformer inference",
    "the Doppler effect",
    "container orchestration",
    "a bicycle gear system",
    "ocean tides",
    "recursion",
    "the printing press",
    "PID controllers",
    "coral reefs",
    "SQL joins",
    "jet engines",
    "the placebo effect",
    "CRDTs",
]
AUDIENCES = [
    "a ten-year-old",
    "a new engineer on my team",
    "my grandmother",
    "a busy executive",
    "a first-year university student",
    "someone who has never programmed",
]
TASKS = [
    "Explain {s} to {a} in three short paragraphs.",
    "Give me five bullet points on the most common misconceptions about {s}.",
    "Write a haiku about {s}.",
    "Compare {s} with {t}: what do they have in common, and where do they differ?",
    "What questions would an interviewer ask to check that a candidate really understands {s}?",
    "Write a short, friendly email to {a} that introduces {s}.",
    "Summarize the history of {s} in under 120 words.",
    "I keep confusing {s} and {t}. Can you give me a memorable way to tell them apart?",
    "Draft a one-page study plan for learning {s} over two weeks.",
    "List three experiments or exercises that demonstrate {s}, with the materials each needs.",
    "Write a limerick that explains {s}.",
    "What would go wrong in the world if {s} stopped working for a day? Be concrete.",
    "Give a step-by-step walkthrough of {s}, numbering each step.",
    "Tell me a short story (about 200 words) in which {s} saves the day.",
    "Rate these analogies for {s} from best to worst and say why: a library, a river, a kitchen.",
    "Write a multiple-choice quiz with four questions about {s}, and give the answers at the end.",
    "Explain {s} using only words of one syllable where you can.",
    "What are the trade-offs a practitioner should weigh when working with {s}?",
]
CODE = [
    "Write a Python function that checks whether a string is a palindrome, ignoring punctuation "
    "and case.",
    "Implement an LRU cache in Python with get and put in O(1), and explain the data structures "
    "you chose.",
    "Write a SQL query that returns the three highest-paid employees in each department.",
    "Explain what this shell command does, piece by piece: find . -name '*.log' -mtime +7 -delete",
    "Write a Rust function that reverses the words in a sentence without allocating a new vector "
    "per word.",
    "Review this Python and point out the bug: def avg(xs): return sum(xs) / len(xs) if xs else "
    "sum(xs) / 0",
    "Write a regular expression that matches ISO 8601 dates like 2024-03-15, "
    "and explain each part.",
    "Convert this loop into a list comprehension: out = []\n"
    "for x in range(20):\n    if x % 3 == 0:\n        out.append(x * x)",
    "Write a bash script that retries a command up to five times with exponential backoff.",
    "Explain the difference between a process and a thread, with an example of when to use each.",
    "Write a JavaScript debounce function and a short example of using it on a search box.",
    "How would you design a rate limiter for an HTTP API? Describe the token-bucket approach with "
    "code.",
    "Write a C function that counts the set bits in a 64-bit integer, and give two different "
    "approaches.",
    "Explain Big-O notation and give the complexity of binary search, merge sort "
    "and a nested loop.",
    "Write a Python generator that yields the Fibonacci numbers below a limit.",
    "What is a race condition? Show a minimal Python example and how a lock fixes it.",
    "Write unit tests with pytest for a function add(a, b) that must reject non-numeric input.",
    "Explain what a Dockerfile's multi-stage build is for, with a short example for a Go service.",
    "Write a Python script that reads a CSV of (date, amount) rows and prints the monthly totals.",
    "Explain the CAP theorem and name a real database for each trade-off.",
]
MATH = [
    "A train leaves at 9:40 and arrives at 13:05. How long is the journey? Show your reasoning.",
    "What is the probability of rolling at least one six in four throws of a fair die?",
    "Solve for x: 3x + 7 = 2x - 5, and check your answer.",
    "If a shirt costs 40 euros after a 20 percent discount, what was its original price?",
    "Explain why the sum of the angles of a triangle is 180 degrees.",
    "How many ways can you arrange the letters of the word LEVEL?",
    "A recipe for 4 people needs 300 g of flour. How much for 7 people?",
    "What is the derivative of x^3 * sin(x)? Show each step.",
    "Estimate how many piano tuners work in a city of one million people, "
    "stating your assumptions.",
    "Is 221 a prime number? Explain how you checked.",
    "A car travels 150 km at 100 km/h and then 150 km at 50 km/h. What is its average speed?",
    "Explain the Monty Hall problem and why switching doors is the better strategy.",
    "What is 17 percent of 2,350? Then round it to the nearest ten.",
    "Prove that the square root of 2 is irrational.",
    "Convert 98.6 degrees Fahrenheit to Celsius and explain the formula.",
]
PASSAGES = [
    "The committee met on Tuesday to discuss the new parking policy. After two hours of debate, "
    "members agreed to a trial period of three months, during which staff may reserve spaces "
    "online. Visitors will keep free parking on weekends. A survey will follow the trial.",
    "Our quarterly results show revenue up 12 percent, driven mostly by the subscription business, "
    "while hardware sales fell for the second quarter in a row. Operating costs rose because of "
    "new hiring in support. We expect margins to recover next year as the hiring slows.",
    "The hiking trail climbs 800 metres over six kilometres through pine forest before opening "
    "onto a ridge with views of three lakes. The descent is steep and loose in places; poles are "
    "recommended. There is no water on the route after the first kilometre.",
    "Version 2.4 of the library drops support for Python 3.8, adds type hints to the public API, "
    "and changes the default timeout from 30 to 10 seconds. The old configuration keys still work "
    "but print a deprecation warning; they will be removed in 3.0.",
    "Mara found the letter in a book she had bought at a flea market. It was dated 1962, addressed "
    "to someone called Tomas, and ended with a line about meeting at the lighthouse when the fog "
    "lifted. She decided to find out whether they ever met.",
]
PASSAGE_TASKS = [
    "Summarize this in one sentence:\n\n{p}",
    "List the key facts in this text as bullet points:\n\n{p}",
    "Rewrite this for a formal report:\n\n{p}",
    "What questions does this text leave unanswered?\n\n{p}",
    "Translate this into simple English for a non-native reader:\n\n{p}",
    "Write a headline and a two-sentence teaser for this:\n\n{p}",
]
ADVICE = [
    "I have a job interview tomorrow for a data analyst role. What should I prepare tonight?",
    "How can I politely decline a meeting that I do not need to attend?",
    "Suggest a three-day itinerary for a first visit to Lisbon on a modest budget.",
    "What are some good habits for keeping a small vegetable garden healthy in a hot summer?",
    "My team's code reviews take days. What process changes could speed them up?",
    "Give me a weekly meal plan for a vegetarian who wants about 120 g of protein a day.",
    "How do I start running if I have never exercised regularly? Give a six-week plan.",
    "What should I check before buying a used car?",
    "Help me write a toast for my sister's wedding; she loves sailing and bad puns.",
    "How can I explain a two-week project delay to a client without losing their trust?",
    "What are the pros and cons of renting versus buying a home in a large city?",
    "Suggest ten names for a neighbourhood book club that meets in a bakery.",
    "I get distracted working from home. What concrete routines help?",
    "What is a sensible way to learn a new language in 20 minutes a day?",
    "Plan a rainy-day activity for four children aged six to nine, using things found at home.",
]
CLASSIFY = [
    "Classify the sentiment of this review as positive, negative or mixed: 'The battery lasts "
    "forever, but the screen scratches if you look at it.'",
    "Which of these is not a mammal: dolphin, bat, penguin, whale? Explain briefly.",
    "Sort these by size, smallest first: a grain of sand, a virus, a red blood cell, a bacterium.",
    "Is this sentence grammatically correct? 'Neither of the answers are right.' Explain.",
    "Tag each word in 'The quick brown fox jumps' with its part of speech.",
    "Extract the dates and amounts from: 'Paid 45.20 on 3 May, then 120 on 17 June and 9.99 on 1 "
    "July.'",
    "Decide whether this email is spam and say why: 'Congratulations! You won a cruise. Reply with "
    "your bank details.'",
    "Group these foods into fruits and vegetables: tomato, carrot, apple, cucumber, banana, "
    "spinach.",
    "Which programming paradigm does this describe: functions as values, no mutable state, "
    "recursion over loops?",
    "Return a JSON object with the fields name, city and age for: 'Ana, 34, lives in Porto.'",
]


def main():
    rng = random.Random(20240614)
    prompts = []
    for _ in range(150):
        s, t = rng.sample(SUBJECTS, 2)
        prompts.append(rng.choice(TASKS).format(s=s, t=t, a=rng.choice(AUDIENCES)))
    prompts += CODE + MATH + ADVICE + CLASSIFY
    prompts += [pt.format(p=p) for p in PASSAGES for pt in PASSAGE_TASKS]
    for _ in range(320 - len(prompts)):
        s, t = rng.sample(SUBJECTS, 2)
        prompts.append(rng.choice(TASKS).format(s=s, t=t, a=rng.choice(AUDIENCES)))
    seen, out = set(), []
    for p in prompts:
        if p not in seen:
            seen.add(p)
            out.append(p)
    rng.shuffle(out)
    for p in out:
        print(json.dumps({"text": p}, ensure_ascii=False))


if __name__ == "__main__":
    main()
